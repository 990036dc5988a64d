"""One-click Slurm proven on real daemons: the files `core.slurmconf` renders for a 2-node
cluster (two leaves under one spine) start slurmctld and two slurmd on this host, a job on both
nodes sees its 8 GPUs each, and Slurm reads the leaf/spine tree back."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from cardhour.core.slurmconf import SlurmNode, render

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slurm-cluster.sh"

pytestmark = pytest.mark.skipif(
    shutil.which("apt-get") is None and shutil.which("slurmctld") is None,
    reason="needs Debian's slurm-wlm (the script installs it with apt-get)",
)


def test_generated_files_run_a_cluster_whose_jobs_see_their_gpus() -> None:
    folder = Path(tempfile.mkdtemp(prefix="cardhour-slurm-", dir="/tmp"))
    folder.chmod(0o755)  # munged wants every directory above its socket searchable
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or "0"
    port = 23000 + 300 * int(worker)
    host = socket.gethostname().split(".")[0]
    nodes = [
        SlurmNode("llm", "127.0.0.1", 8, "h100", 16, 65536, "leaf1", "spine1", port + 101, host),
        SlurmNode(
            "llm-worker1", "127.0.0.1", 8, "h100", 16, 65536, "leaf2", "spine1", port + 102, host
        ),
    ]
    files = render(
        "llm",
        nodes,
        base=str(folder),
        ctld_port=port,
        slurmd_port=port + 100,
        gpu_files=f"{folder}/dev/nvidia[0-7]",
        munge_socket=f"{folder}/run/munge.socket",
        controller_host=host,
        extra=["SlurmdParameters=config_overrides"],  # 16 CPUs advertised on a small host
    )
    (folder / "etc").mkdir()
    for name, text in files.as_dict().items():
        (folder / "etc" / name).write_text(text)
    env = {**os.environ, "SLURM_CONF": str(folder / "etc" / "slurm.conf")}
    try:
        started = subprocess.run(
            [str(SCRIPT), "run", str(folder), "llm", "llm-worker1"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert started.returncode == 0, started.stdout + started.stderr
        job = subprocess.run(
            [
                "srun",
                "-N2",
                "--gres=gpu:h100:8",
                "bash",
                "-c",
                "echo $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert job.returncode == 0, job.stderr
        assert sorted(job.stdout.splitlines()) == [
            "llm 0,1,2,3,4,5,6,7",
            "llm-worker1 0,1,2,3,4,5,6,7",
        ]
        tree = subprocess.run(
            ["scontrol", "show", "topology"], capture_output=True, text=True, env=env, timeout=30
        ).stdout
        assert "SwitchName=leaf1" in tree and "Nodes=llm-worker1" in tree
        assert "SwitchName=spine1 Level=1" in tree and "Switches=leaf1,leaf2" in tree
    finally:
        subprocess.run([str(SCRIPT), "stop", str(folder)], timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
