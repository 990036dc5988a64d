"""The Slurm backend: the operator's GPU servers are Slurm nodes with `gpu` gres, and each
workload is one Slurm job named by its external name (`ch-<instance>-<attempt>`).

Talks to Slurm through its CLI (shared/docs/SLURM.md: Debian's 22.05; pyslurm does not build
against it): `sbatch --parsable` to launch, `squeue --json` to read jobs back (22.05 ignores its
filters with `--json`, so jobs are filtered here by name), `scancel --name` to terminate, and
`sinfo --json` for the inventory. The cardhour scheduler picks the nodes and GPUs; the job is
pinned to those nodes (`--nodelist`) and asks Slurm for the same count per node
(`--gres=gpu:<type>:k`, `--exclusive` for whole nodes), so Slurm's own accounting agrees and a job
that cannot fit is refused at submit ("Requested node configuration is not available"). The
GPU indices a job really got come back from Slurm (`gres_detail`, `IDX:0-1`).

Drains: a node Slurm reports drained or down is left out of the inventory, so the platform
stops placing on it; `drain` / `resume` mirror the platform's own drains into Slurm. The
readiness gate's probes, run inside a job's allocation, are in probes.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cardhour.backends.base import (
    Backend,
    BackendError,
    LaunchSpec,
    MachineState,
    PollResult,
    ProvisioningFailed,
)
from cardhour.core.topology import NodeSpec

_GRES = re.compile(r"gpu:(?P<type>[A-Za-z0-9_.-]+):(?P<count>\d+)")
_IDX = re.compile(r"IDX:(?P<idx>[0-9,\-]+)")
UNUSABLE = ("drain", "down", "fail", "maint", "future", "not_responding")
PENDING = ("PENDING", "CONFIGURING", "REQUEUED", "RESIZING", "SUSPENDED")
JOB_SCRIPT = """#!/bin/bash
# cardhour workload {name}: holds its GPUs until cancelled. On start, one step per node prints
# what Slurm gave it and writes the workload's SSH keys to that node's file (the gate reads
# them back from the node). The job is up once every node has them (the ready marker).
export CARDHOUR_KEYS={keys} CARDHOUR_NODES={nodes}
srun --ntasks-per-node=1 bash -c 'echo "node=$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES"; \
  install -D -m 600 "$CARDHOUR_KEYS" "$CARDHOUR_NODES/$SLURMD_NODENAME.authorized_keys"' || exit 1
touch "$CARDHOUR_NODES/job-$SLURM_JOB_ID.ready"
exec sleep infinity
"""


def job_id_of(job: Mapping[str, Any]) -> int:
    """The id of a job as `squeue --json` lists it (0 when it carries none)."""
    return int(job.get("job_id", 0))


def _attempt(job: Mapping[str, Any]) -> int:
    """The placement a job was submitted for (its `--comment`); 0 when it carries none."""
    found = re.search(r"cardhour-attempt=(\d+)", str(job.get("comment") or ""))
    return int(found.group(1)) if found else 0


def _indices(text: str) -> list[int]:
    """`0-1,4` → [0, 1, 4]."""
    out: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


class SlurmBackend(Backend):
    name = "slurm"

    def __init__(
        self,
        slurm_conf: Path,
        work_dir: Path,
        data_centre: str,
        gpu_models: Mapping[str, str],
        partition: str | None = None,
        timeout_seconds: float = 30,
        ib_rails: int = 8,
        ib_gbps_per_rail: int = 400,
    ) -> None:
        """`gpu_models`: Slurm gres type → the catalog's GPU model id (`{"h100": "H100"}`).
        Leaves and spines come from Slurm's `topology/tree` (`scontrol show topology`); the
        NICs per node (`ib_rails` × `ib_gbps_per_rail`), which Slurm does not know, from here."""
        self.slurm_conf = slurm_conf
        self.work_dir = work_dir
        self.data_centre = data_centre
        self.gpu_models = dict(gpu_models)
        self.gres_types = {model: gres for gres, model in self.gpu_models.items()}
        self.partition = partition
        self.timeout = timeout_seconds
        self.ib_rails, self.ib_gbps_per_rail = ib_rails, ib_gbps_per_rail

    # -- the contract --------------------------------------------------------------------

    def sync_inventory(self) -> list[NodeSpec]:
        leaf_of, spine_of = self._topology()
        nodes = []
        for node in self._json("sinfo", "--json").get("nodes", []):
            state = " ".join([str(node.get("state", "")), *map(str, node.get("state_flags", []))])
            found = _GRES.search(str(node.get("gres", "")))
            if found is None or any(word in state.lower() for word in UNUSABLE):
                continue
            model = self.gpu_models.get(found["type"])
            if model is None:
                continue
            leaf = leaf_of.get(str(node["name"]))
            nodes.append(
                NodeSpec(
                    id=str(node["name"]),
                    data_centre=self.data_centre,
                    gpu_model=model,
                    gpu_count=int(found["count"]),
                    cpus=int(node.get("cpus", 0)),
                    memory_gb=int(node.get("real_memory", 0)) // 1024,
                    ib_leaf=leaf,
                    ib_spine=spine_of.get(leaf, f"{leaf}-spine") if leaf else None,
                    ib_rails=self.ib_rails if leaf else 0,
                    ib_gbps_per_rail=self.ib_gbps_per_rail if leaf else 0,
                )
            )
        return sorted(nodes, key=lambda n: n.id)

    def launch(self, spec: LaunchSpec) -> None:
        live = self._jobs(spec.external_name, live_only=True)
        if live:
            newest = max(live, key=job_id_of)
            if _attempt(newest) > spec.attempt:
                return  # a newer placement's job: this launch comes from a stale claim
            if sorted(self._pinned_to(newest)) == sorted(spec.gpus_by_node):
                return  # already submitted under this name
            # the platform replaced nodes: a job cannot change its nodes, so resubmit
            self._cancel_and_wait(spec.external_name)
        nodes = sorted(spec.gpus_by_node)
        per_node = {len(g) for g in spec.gpus_by_node.values()}
        if len(per_node) != 1:
            raise ProvisioningFailed(f"uneven GPUs per node {sorted(per_node)}")
        count = per_node.pop()
        gres = self.gres_types.get(spec.gpu_model)
        if gres is None:
            raise ProvisioningFailed(f"no Slurm gres type for GPU model {spec.gpu_model}")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        keys = self.work_dir / f"{spec.external_name}.keys"
        keys.write_text(spec.ssh_key or "")
        script = self.work_dir / f"{spec.external_name}.sh"
        script.write_text(
            JOB_SCRIPT.format(
                name=spec.external_name,
                keys=shlex.quote(str(keys)),
                nodes=shlex.quote(str(self._node_dir(spec.external_name))),
            )
        )
        args = [
            "sbatch",
            "--parsable",
            f"--job-name={spec.external_name}",
            f"--comment=cardhour-attempt={spec.attempt}",
            f"--nodes={len(nodes)}",
            f"--nodelist={','.join(nodes)}",
            f"--gres=gpu:{gres}:{count}",
            f"--output={self.work_dir / (spec.external_name + '.out')}",
            f"--chdir={self.work_dir}",
        ]
        if len(nodes) > 1 or spec.exclusive:
            args.append("--exclusive")  # a cluster, or bare metal, holds its nodes whole
        if self.partition:
            args.append(f"--partition={self.partition}")
        done = self._run(*args, str(script), check=False)
        if done.returncode != 0:
            why = done.stderr.strip().removeprefix("sbatch: error: ") or "sbatch failed"
            raise ProvisioningFailed(f"Slurm refused the job: {why}")

    def poll(self, external_name: str) -> PollResult:
        jobs = self._jobs(external_name, live_only=False)
        if not jobs:
            return PollResult(MachineState.GONE)
        job = max(jobs, key=job_id_of)
        state = str(job.get("job_state", ""))
        if state in PENDING:
            return PollResult(MachineState.PROVISIONING, message=str(job.get("state_reason", "")))
        if state == "RUNNING":
            if not self._set_up(external_name, job):
                return PollResult(
                    MachineState.PROVISIONING, message="installing SSH keys on its nodes"
                )
            return PollResult(MachineState.RUNNING, self._connection(job))
        if state in ("FAILED", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY", "DEADLINE", "TIMEOUT"):
            return PollResult(MachineState.FAILED, message=f"Slurm job {state.lower()}")
        return PollResult(MachineState.GONE, message=f"Slurm job {state.lower()}")

    def terminate(self, external_name: str) -> None:
        self._run("scancel", f"--name={external_name}")

    def _cancel_and_wait(self, external_name: str) -> None:
        self.terminate(external_name)
        deadline = time.monotonic() + self.timeout
        while self._jobs(external_name, live_only=True):
            if time.monotonic() > deadline:
                raise BackendError(f"{external_name}: Slurm did not cancel the old job in time")
            time.sleep(0.2)

    def _pinned_to(self, job: Mapping[str, Any]) -> list[str]:
        """The nodes a job holds, or (while it waits) the nodes it was pinned to."""
        return self._expand(str(job.get("nodes") or job.get("required_nodes") or ""))

    def _set_up(self, external_name: str, job: Mapping[str, Any]) -> bool:
        """Whether the running job's first step (keys on every node) has finished: until then
        the job holds its nodes but is not up yet."""
        return (self._node_dir(external_name) / f"job-{job_id_of(job)}.ready").exists()

    def _node_dir(self, external_name: str) -> Path:
        """Where each node's step installs the workload's keys (on the cluster's shared
        filesystem, like the job's working directory)."""
        return self.work_dir / f"{external_name}.nodes"

    # -- drains mirrored into Slurm --------------------------------------------------------

    def drain(self, node: str, reason: str) -> None:
        self._run("scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}")

    def resume(self, node: str) -> None:
        self._run("scontrol", "update", f"nodename={node}", "state=resume")

    # -- plumbing --------------------------------------------------------------------------

    def _topology(self) -> tuple[dict[str, str], dict[str, str]]:
        """(node → leaf switch, leaf → spine) from `scontrol show topology`; empty without the
        tree plugin."""
        done = self._run("scontrol", "show", "topology", check=False)
        leaf_of: dict[str, str] = {}
        spine_of: dict[str, str] = {}
        for line in done.stdout.splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            name, level = fields.get("SwitchName"), fields.get("Level")
            if name is None:
                continue
            if level == "0" and "Nodes" in fields:
                for node in self._expand(fields["Nodes"]):
                    leaf_of[node] = name
            elif "Switches" in fields:
                for leaf in self._expand(fields["Switches"]):
                    spine_of[leaf] = name
        return leaf_of, spine_of

    def _connection(self, job: Mapping[str, Any]) -> dict[str, Any]:
        nodes = self._expand(str(job.get("nodes", "")))
        gpus = {}
        for node, detail in zip(nodes, job.get("gres_detail", []) or [], strict=False):
            found = _IDX.search(str(detail))
            gpus[node] = _indices(found["idx"]) if found else []
        return {
            "slurm_job_id": int(job["job_id"]),
            "nodes": nodes,
            "gpus_by_node": gpus,
            "hosts": {n: n for n in nodes},
            "user": str(job.get("user_name", "root")),
            "port": 22,
            "ssh": f"ssh {nodes[0]}" if nodes else "",
        }

    def _expand(self, hostlist: str) -> list[str]:
        if not hostlist:
            return []
        done = self._run("scontrol", "show", "hostnames", hostlist)
        return done.stdout.split()

    def _jobs(self, name: str, live_only: bool) -> list[dict[str, Any]]:
        jobs = [j for j in self._json("squeue", "--json").get("jobs", []) if j.get("name") == name]
        if live_only:
            jobs = [j for j in jobs if j.get("job_state") in (*PENDING, "RUNNING")]
        return jobs

    def _json(self, *args: str) -> dict[str, Any]:
        done = self._run(*args)
        try:
            parsed = json.loads(done.stdout)
        except ValueError as exc:
            raise BackendError(f"{args[0]} --json printed no JSON") from exc
        if not isinstance(parsed, dict):
            raise BackendError(f"{args[0]} --json printed {type(parsed).__name__}")
        return parsed

    def _run(
        self, *args: str, check: bool = True, timeout: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "SLURM_CONF": str(self.slurm_conf)}
        try:
            done = subprocess.run(
                list(args),
                capture_output=True,
                text=True,
                env=env,
                timeout=timeout or self.timeout,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BackendError(f"{shlex.join(args)}: {exc}") from exc
        if check and done.returncode != 0:
            raise BackendError(f"{shlex.join(args)}: {done.stderr.strip() or done.returncode}")
        return done
