"""The Slurm backend against a real Slurm cluster (Debian slurm-wlm 22.05, started by
scripts/slurm-cluster.sh in a temp dir: 4 logical nodes × 8 fake H100 on this host, one leaf).

Each job really runs: its script prints what Slurm gave it on every node (`srun`), and the
test reads that back."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cardhour.api.app import create_app
from cardhour.backends.base import (
    BackendError,
    LaunchSpec,
    MachineState,
    PollResult,
    ProvisioningFailed,
)
from cardhour.backends.slurm import SlurmBackend
from cardhour.core.clock import ManualClock
from cardhour.core.money import Money
from cardhour.core.readiness import STAGES
from cardhour.platform import Platform
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import ledger
from cardhour.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "slurm-cluster.sh"

pytestmark = pytest.mark.skipif(
    shutil.which("apt-get") is None and shutil.which("slurmctld") is None,
    reason="needs Debian's slurm-wlm (the script installs it with apt-get)",
)


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmBackend]:
    # munged wants every directory above its socket searchable by all: pytest's temp dirs
    # are private, so the cluster lives in a directory of its own under /tmp
    folder = Path(tempfile.mkdtemp(prefix="cardhour-slurm-", dir="/tmp"))
    folder.chmod(0o755)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or "0"
    port = 21000 + 300 * int(worker)
    started = subprocess.run(
        [str(SCRIPT), "start", str(folder / "cluster"), str(port), "4"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert started.returncode == 0, started.stdout + started.stderr
    conf = Path(started.stdout.strip().removeprefix("SLURM_CONF="))
    try:
        yield SlurmBackend(conf, folder / "jobs", "bj1", {"h100": "H100"})
    finally:
        subprocess.run([str(SCRIPT), "stop", str(folder / "cluster")], timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def wait_for(backend: SlurmBackend, name: str, state: MachineState) -> PollResult:
    deadline = time.monotonic() + 30
    while True:
        polled = backend.poll(name)
        if polled.state == state or time.monotonic() > deadline:
            return polled
        time.sleep(0.2)


def lines(backend: SlurmBackend, name: str, count: int) -> list[str]:
    out = backend.work_dir / f"{name}.out"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        found = out.read_text().splitlines() if out.exists() else []
        if len(found) >= count:
            return sorted(found)
        time.sleep(0.2)
    return out.read_text().splitlines() if out.exists() else []


def spec(name: str, gpus_by_node: dict[str, list[int]]) -> LaunchSpec:
    count = sum(len(g) for g in gpus_by_node.values())
    return LaunchSpec(name, "H100", count, gpus_by_node, "pytorch-2.3-cuda12.3", None)


def test_inventory_and_drains_mirror_slurm(slurm: SlurmBackend) -> None:
    nodes = slurm.sync_inventory()
    assert [(n.id, n.gpu_model, n.gpu_count, n.cpus) for n in nodes] == [
        ("node1", "H100", 8, 16),
        ("node2", "H100", 8, 16),
        ("node3", "H100", 8, 16),
        ("node4", "H100", 8, 16),
    ]
    slurm.drain("node3", "bad NVSwitch")
    try:
        assert [n.id for n in slurm.sync_inventory()] == ["node1", "node2", "node4"]
        # a job pinned to the drained node waits; it is never started there
        slurm.launch(spec("ch-drained-1", {"node3": [0]}))
        time.sleep(1)
        assert slurm.poll("ch-drained-1").state == MachineState.PROVISIONING
        slurm.terminate("ch-drained-1")
    finally:
        slurm.resume("node3")
    deadline = time.monotonic() + 10  # briefly `idle*` (not responding) after a resume
    while len(slurm.sync_inventory()) < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [n.id for n in slurm.sync_inventory()] == ["node1", "node2", "node3", "node4"]


def test_a_two_gpu_container_sees_its_gpus(slurm: SlurmBackend) -> None:
    slurm.launch(spec("ch-box-1", {"node1": [0, 1]}))
    slurm.launch(spec("ch-box-1", {"node1": [0, 1]}))  # idempotent by name
    running = wait_for(slurm, "ch-box-1", MachineState.RUNNING)
    assert running.state == MachineState.RUNNING, running
    assert running.connection["gpus_by_node"] == {"node1": [0, 1]}
    assert lines(slurm, "ch-box-1", 1) == ["node=node1 gpus=0,1"]
    assert len(slurm._jobs("ch-box-1", live_only=True)) == 1
    slurm.terminate("ch-box-1")
    assert wait_for(slurm, "ch-box-1", MachineState.GONE).state == MachineState.GONE
    slurm.terminate("ch-box-1")  # gone already: silent


def test_a_two_node_cluster_holds_both_nodes_whole(slurm: SlurmBackend) -> None:
    every = list(range(8))
    slurm.launch(spec("ch-pair-1", {"node1": every, "node2": every}))
    running = wait_for(slurm, "ch-pair-1", MachineState.RUNNING)
    assert running.state == MachineState.RUNNING, running
    assert running.connection["nodes"] == ["node1", "node2"]
    keys = slurm._node_dir("ch-pair-1")  # running means up: the first step put keys on each node
    assert sorted(p.name for p in keys.glob("*.authorized_keys")) == [
        "node1.authorized_keys",
        "node2.authorized_keys",
    ]
    assert lines(slurm, "ch-pair-1", 2) == [
        "node=node1 gpus=0,1,2,3,4,5,6,7",
        "node=node2 gpus=0,1,2,3,4,5,6,7",
    ]
    slurm.terminate("ch-pair-1")  # down cancels the job
    assert wait_for(slurm, "ch-pair-1", MachineState.GONE).state == MachineState.GONE


def test_bare_metal_holds_its_node_against_other_jobs(slurm: SlurmBackend) -> None:
    bare = spec("ch-metal-1", {"node3": list(range(8))})
    slurm.launch(LaunchSpec(**{**bare.__dict__, "exclusive": True}))
    assert wait_for(slurm, "ch-metal-1", MachineState.RUNNING).state == MachineState.RUNNING
    jobs = slurm._jobs("ch-metal-1", live_only=True)
    assert len(jobs) == 1
    detail = subprocess.run(
        ["scontrol", "show", "job", "-o", str(jobs[0]["job_id"])],
        capture_output=True,
        text=True,
        env={**os.environ, "SLURM_CONF": str(slurm.slurm_conf)},
        check=True,
    ).stdout
    assert "OverSubscribe=NO" in detail  # Slurm's word for an exclusive job
    slurm.terminate("ch-metal-1")
    assert wait_for(slurm, "ch-metal-1", MachineState.GONE).state == MachineState.GONE


def test_an_over_large_request_is_refused_with_slurms_reason(slurm: SlurmBackend) -> None:
    with pytest.raises(ProvisioningFailed, match="Requested node configuration is not available"):
        slurm.launch(spec("ch-huge-1", {"node1": list(range(9))}))
    assert slurm.poll("ch-huge-1").state in (MachineState.GONE, MachineState.FAILED)


def test_the_platform_runs_a_cluster_and_a_container_on_slurm(
    slurm: SlurmBackend, tmp_path: Path
) -> None:
    """Through the REST API with `backend = slurm`: the inventory comes from Slurm (its
    topology tree gives the IB leaf), a 2-node × 8 cluster and a 2-GPU container run as Slurm
    jobs that see their GPUs, a drained node is not placed on, `down` cancels the jobs."""
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'db.sqlite'}",
        backend="slurm",
        slurm={"conf": slurm.slurm_conf, "data_centre": "bj1"},
    )
    platform = Platform(settings, clock=ManualClock())
    jobs = settings.data_dir / "slurm-jobs"
    try:
        with TestClient(create_app(platform)) as client:
            r = client.post(
                "/api/v1/auth/signup", json={"email": "s@example.com", "password": "pw-12345678"}
            )
            headers = {"Authorization": f"Bearer {r.json()['api_key']}"}
            with platform.sessions() as s, s.begin():
                user = accounts.sign_in(s, "s@example.com", "pw-12345678")
                ledger.top_up(s, user.id, Money.parse("500"), platform.clock.now(), "slurm")
            platform.reconcile()  # inventory from sinfo
            slurm.drain("node3", "maintenance")
            platform.reconcile()
            for body in (
                {"gpu": "H100", "count": 8, "nodes": 2, "name": "pair"},
                {"gpu": "H100", "count": 2, "name": "box"},
            ):
                assert client.post("/api/v1/instances", headers=headers, json=body).is_success
                platform.reconcile()  # placed in this order (the pair takes node1 and node2)

            def shown(name: str) -> dict[str, object]:
                return client.get(f"/api/v1/instances/{name}", headers=headers).json()

            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                platform.reconcile()
                if shown("pair")["status"] == "running" and shown("box")["status"] == "running":
                    break
                time.sleep(0.3)
            pair, box = shown("pair"), shown("box")
            assert pair["status"] == "running", pair["status_reason"]
            assert box["status"] == "running", box["status_reason"]
            assert pair["nodes"] == ["node1", "node2"] and box["nodes"] == ["node4"]
            pair_out = jobs / f"ch-{pair['id']}-1.out"
            box_out = jobs / f"ch-{box['id']}-1.out"
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and not (pair_out.exists() and box_out.exists()):
                time.sleep(0.2)
            every = ",".join(map(str, range(8)))
            assert sorted(pair_out.read_text().splitlines()) == [
                f"node=node1 gpus={every}",
                f"node=node2 gpus={every}",
            ]
            assert box_out.read_text().split()[1] == "gpus=0,1"
            for name in ("pair", "box"):
                assert client.delete(f"/api/v1/instances/{name}", headers=headers).is_success
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and (slurm._jobs(f"ch-{pair['id']}-1", True)):
                platform.reconcile()
                time.sleep(0.2)
            assert slurm.poll(f"ch-{pair['id']}-1").state == MachineState.GONE
            assert slurm.poll(f"ch-{box['id']}-1").state == MachineState.GONE
    finally:
        slurm.resume("node3")
        platform.stop()


def _fake_tools(folder: Path) -> tuple[dict[str, str], Path]:
    """Stand-ins for nvidia-smi, ibstat and all_reduce_perf (these hosts have no GPU): each
    prints the recorded sample of an 8 × H100 SXM node (tests/fixtures) and logs where Slurm
    ran it. Returns the gate's settings and the log."""
    fixtures = ROOT / "tests" / "fixtures"
    log = folder / "probes.log"
    nccl = fixtures / "nccl"
    where = "on=$SLURMD_NODENAME job=$SLURM_JOB_ID gpus=$CUDA_VISIBLE_DEVICES"
    tools = {
        "nvidia-smi": f"cat {fixtures / 'topology' / 'nvidia-smi-topo-8xH100-SXM.txt'}",
        "ibstat": f"cat {fixtures / 'topology' / 'ibstat-8xNDR.txt'}",
        "all_reduce_perf": (
            '[ "${SLURM_PROCID:-0}" = 0 ] || exit 0\n'
            f'if [ "$SLURM_NNODES" -gt 1 ]; then cat {nccl / "all_reduce_2x8_h100_ib_ndr.txt"}; '
            f"else cat {nccl / 'all_reduce_1x8_h100_sxm.txt'}; fi"
        ),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in tools.items():
        path = folder / name
        path.write_text(f'#!/bin/bash\necho "{name} $* {where}" >> {log}\n{body}\n')
        path.chmod(0o755)
    gate = {
        "gate": True,
        "topo_command": f"{folder / 'nvidia-smi'} topo -m",
        "ibstat_command": str(folder / "ibstat"),
        "all_reduce_command": str(folder / "all_reduce_perf"),
    }
    return gate, log


def test_the_readiness_gate_runs_inside_the_slurm_job_and_a_lost_node_is_replaced(
    slurm: SlurmBackend, tmp_path: Path
) -> None:
    """`slurm.gate`: every stage runs as a step of the cluster's own job (`srun --jobid
    --overlap`) on each node; the keys the job installed are read back per node; the cluster
    is billable from `ready`. A node Slurm then reports down is replaced: the job is resubmitted
    on the new nodes and the gate runs again there."""
    gate, log = _fake_tools(tmp_path / "tools")
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'db.sqlite'}",
        backend="slurm",
        slurm={"conf": slurm.slurm_conf, "data_centre": "bj1", **gate},
    )
    platform = Platform(settings, clock=ManualClock())
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id")], check=True
    )
    key = (tmp_path / "id.pub").read_text().strip()
    try:
        with TestClient(create_app(platform)) as client:
            r = client.post(
                "/api/v1/auth/signup", json={"email": "g@example.com", "password": "pw-12345678"}
            )
            headers = {"Authorization": f"Bearer {r.json()['api_key']}"}
            assert client.post(
                "/api/v1/ssh-keys", headers=headers, json={"public_key": key}
            ).is_success
            with platform.sessions() as s, s.begin():
                user = accounts.sign_in(s, "g@example.com", "pw-12345678")
                ledger.top_up(s, user.id, Money.parse("500"), platform.clock.now(), "slurm")
            platform.reconcile()
            body = {"gpu": "H100", "count": 8, "nodes": 2, "name": "gated"}
            assert client.post("/api/v1/instances", headers=headers, json=body).is_success

            def shown() -> dict[str, Any]:
                return client.get("/api/v1/instances/gated", headers=headers).json()

            def settle_until(done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    platform.reconcile()
                    if done(now := shown()):
                        return now
                    time.sleep(0.3)
                return shown()

            ready = settle_until(lambda i: i["status"] in ("running", "failed"))
            assert ready["status"] == "running", ready["status_reason"]
            outcomes = {st["name"]: st["outcome"] for st in ready["stages"]}
            assert outcomes == dict.fromkeys(STAGES, "ok")  # keys too: injected on each node
            assert ready["gate"]["nccl_busbw_gbps"] == dict.fromkeys(ready["nodes"], 476.7)
            assert ready["gate"]["across_nodes_gbps"] == 370.3
            probes = log.read_text().splitlines()
            for node in ready["nodes"]:  # each probe ran on its node, inside the job, with its GPUs
                assert any(
                    p.startswith("nvidia-smi topo -m on=" + node)
                    and p.endswith("gpus=0,1,2,3,4,5,6,7")
                    for p in probes
                )
            assert any(p.startswith("all_reduce_perf -b 8 -e 8G -f 2 -g 1 on=") for p in probes)

            lost = ready["nodes"][1]
            slurm.drain(lost, "test")  # kept out of the inventory while it is down
            subprocess.run(
                ["scontrol", "update", f"nodename={lost}", "state=down", "reason=lost"],
                env={**os.environ, "SLURM_CONF": str(slurm.slurm_conf)},
                check=True,
            )
            platform.health.step()  # sees it before slurmd can bring it back
            again = settle_until(lambda i: i["status"] == "running" and lost not in i["nodes"])
            assert again["status"] == "running", again["status_reason"]
            assert lost not in again["nodes"] and ready["nodes"][0] in again["nodes"]
            replaced = again["stages"][0]["detail"]["replaced"]
            assert list(replaced) == [lost]
            assert any(
                e["reason"].startswith(f"node(s) lost: {lost}: Slurm reports it")
                for e in again["events"]
                if e["reason"]
            )
            job = slurm._jobs(f"ch-{again['id']}-1", live_only=True)
            assert len(job) == 1 and slurm._expand(job[0]["nodes"]) == sorted(again["nodes"])
            assert client.delete("/api/v1/instances/gated", headers=headers).is_success
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and slurm._jobs(f"ch-{again['id']}-1", True):
                platform.reconcile()
                time.sleep(0.2)
            assert slurm.poll(f"ch-{again['id']}-1").state == MachineState.GONE
    finally:
        for node in ("node1", "node2", "node3", "node4"):
            with contextlib.suppress(BackendError):  # only the lost one was drained
                slurm.resume(node)
        platform.stop()
