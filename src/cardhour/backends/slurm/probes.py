"""The Slurm backend with the readiness gate (`Probing`): the gate's tools run as steps inside
the workload's own job allocation (`srun --jobid=J --overlap`), and the nodes Slurm reports
failing under a workload's job are reported lost.

Contract: each probe returns the step's stdout and raises `BackendError` when the workload has
no running job or the step fails (the gate retries); `lost_nodes` is {} unless the job is
running or was requeued.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from cardhour.backends.base import BackendError, Probing
from cardhour.backends.slurm.backend import SlurmBackend, job_id_of


@dataclass(frozen=True)
class SlurmProbes:
    """The tools the readiness gate runs on a workload's nodes, each as a step inside the job's
    own allocation (`srun --jobid=J --overlap`): `nvidia-smi topo -m`, `ibstat` ("" when the
    nodes have no InfiniBand) and nccl-tests' `all_reduce_perf` (built with MPI for runs
    across nodes: one task per GPU there, `-g 1`)."""

    topo: str = "nvidia-smi topo -m"
    ibstat: str = "ibstat"
    all_reduce: str = "all_reduce_perf"
    timeout_seconds: float = 600  # an 8 GiB all-reduce across nodes, NCCL start-up included


class ProbedSlurmBackend(SlurmBackend, Probing):
    """The Slurm backend with the readiness gate: an instance runs only once its job's nodes
    pass it (settings `slurm.gate`). Nodes Slurm reports down, failing or not responding under
    a running job are lost (`reconcilers.health` has them replaced)."""

    def __init__(self, *args: Any, probes: SlurmProbes | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.probes = probes or SlurmProbes()

    def authorized_keys(self, external_name: str, node: str) -> str:
        path = self._node_dir(external_name) / f"{node}.authorized_keys"
        return self._step(external_name, [node], f"cat {shlex.quote(str(path))}")

    def topology(self, external_name: str, node: str) -> tuple[str, str | None]:
        topo = self._step(external_name, [node], self.probes.topo)
        if not self.probes.ibstat:
            return topo, None
        return topo, self._step(external_name, [node], self.probes.ibstat)

    def all_reduce(self, external_name: str, nodes: list[str], gpus_per_node: int) -> str:
        sizes = "-b 8 -e 8G -f 2"
        if len(nodes) == 1:
            return self._step(
                external_name, nodes, f"{self.probes.all_reduce} {sizes} -g {gpus_per_node}"
            )
        command = f"{self.probes.all_reduce} {sizes} -g 1"
        return self._step(external_name, nodes, command, tasks_per_node=gpus_per_node)

    def lost_nodes(self, external_name: str) -> dict[str, str]:
        """Under a running job: its nodes Slurm reports down, failing or not responding. A job
        Slurm requeued after a node failed (it requeues batch jobs by default): the nodes it
        was pinned to that are now unusable, drained or not responding ones included."""
        jobs = self._jobs(external_name, live_only=False)
        if not jobs:
            return {}
        job = max(jobs, key=job_id_of)
        requeued = job.get("job_state") != "RUNNING" and int(job.get("restart_cnt") or 0) > 0
        if job.get("job_state") != "RUNNING" and not requeued:
            return {}
        # whole state words, so POWER_DOWN and friends do not count; NOT_RESPONDING alone is
        # often a slurmd hiccup, so only a requeued job's nodes count it
        bad = {"down", "fail", "failing"} | ({"drain", "not_responding"} if requeued else set())
        mine = set(self._pinned_to(job))
        lost = {}
        for node in self._json("sinfo", "--json").get("nodes", []):
            name = str(node.get("name"))
            words = [str(node.get("state", "")), *map(str, node.get("state_flags", []))]
            state = " ".join(words)
            if name in mine and {w.lower() for w in words} & bad:
                reason = f" ({node['reason']})" if node.get("reason") else ""
                lost[name] = f"Slurm reports it {state.lower()}{reason}"
        return lost

    def _step(
        self, external_name: str, nodes: list[str], command: str, tasks_per_node: int = 1
    ) -> str:
        """Run `command` as a step of the workload's running job on `nodes`; its stdout.
        BackendError when the job is not running or the step fails (the gate retries)."""
        jobs = [j for j in self._jobs(external_name, live_only=True) if j["job_state"] == "RUNNING"]
        if not jobs:
            raise BackendError(f"{external_name} has no running Slurm job")
        job_id = max(int(j["job_id"]) for j in jobs)
        done = self._run(
            "srun",
            f"--jobid={job_id}",
            "--overlap",
            f"--nodes={len(nodes)}",
            f"--ntasks-per-node={tasks_per_node}",
            f"--nodelist={','.join(nodes)}",
            "bash",
            "-c",
            command,
            check=False,
            timeout=self.probes.timeout_seconds,
        )
        if done.returncode != 0:
            why = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
            raise BackendError(f"{command!r} on {','.join(nodes)}: {why[0]}")
        return done.stdout
