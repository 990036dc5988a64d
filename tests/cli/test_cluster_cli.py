"""A 2-node cluster from the CLI against a real server: `launch --nodes`, the stages and the
nodes in `status`, the ssh config that makes `ssh NAME-worker1` resolve (checked with the real
`ssh -G`), `cardhour ssh`, and `down` removing the config."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_cli import CARDHOUR, Server, admin_config, cli, ok, one_line_error


@pytest.mark.skipif(shutil.which("ssh") is None, reason="openssh-client is installed by make")
def test_two_node_cluster_with_ssh_config(server: Server, tmp_path: Path) -> None:
    user, email = tmp_path / "user" / "config.json", "cluster-user@example.com"
    ok(user, "signup", "--url", server.url, "--email", email, "--password", "password123")
    ok(admin_config(server, tmp_path), "admin", "topup", email, "100")
    home = Path(os.environ["HOME"])
    (home / ".ssh").mkdir(mode=0o700)
    (home / ".ssh" / "config").write_text("Host example\n  User someone\n")

    images = json.loads(ok(user, "images", "--json"))
    assert [i["id"] for i in images if i["default"]] == ["pytorch-2.3-cuda12.3"]
    assert "megatron-lm" in ok(user, "images")
    launched = ok(
        user, "launch", "--gpu", "H100:8", "--nodes", "2", "--name", "pair", "--image", "deepspeed"
    )
    assert (
        "16 × H100" in launched
        and "ssh config written: `ssh pair` and `ssh pair-worker1`" in launched
    )
    shown = json.loads(ok(user, "status", "pair", "--json"))
    assert shown["status"] == "running" and len(shown["nodes"]) == 2
    assert shown["stages"][-1]["name"] == "ready" and shown["gate"]["across_nodes_gbps"] > 120
    head, worker = shown["cluster"]["nodes"]
    assert (head["hostname"], worker["hostname"]) == ("pair", "pair-worker1")
    assert worker["env"]["NODE_RANK"] == "1" and worker["env"]["WORLD_SIZE"] == "16"
    assert worker["env"]["MASTER_ADDR"] == "pair"
    assert shown["cluster"]["hostfile"] == "pair slots=8\npair-worker1 slots=8\n"
    human = ok(user, "status", "pair")
    assert "pair-worker1" in human and "nccl gate" in human

    written = (home / ".cardhour" / "ssh" / "pair").read_text()
    assert "# simulated backend: no real machine exists behind this address" in written
    config = (home / ".ssh" / "config").read_text()
    assert config.startswith("# added by cardhour") and f"Include {home}/.cardhour/ssh/*" in config
    assert config.endswith("Host example\n  User someone\n")  # the user's own entries stay
    resolved = subprocess.run(
        ["ssh", "-G", "-F", str(home / ".ssh" / "config"), "pair-worker1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert f"hostname {worker['address']}" in resolved and "user root" in resolved

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ssh").write_text('#!/bin/sh\necho "ssh $*"\n')
    (fake / "ssh").chmod(0o755)
    path = f"{fake}:{os.environ['PATH']}"
    r = subprocess.run(
        [str(CARDHOUR), "ssh", "pair", "--worker", "1", "--", "nvidia-smi", "-L"],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path, "CARDHOUR_CONFIG": str(user)},
        timeout=60,
    )
    assert r.returncode == 0 and r.stdout == "ssh pair-worker1 nvidia-smi -L\n", r.stderr
    one_line_error(cli(user, "ssh", "pair", "--worker", "2"), "invalid_input")

    written = ok(user, "slurm", "pair", "--out", str(tmp_path / "slurm"))
    assert "wrote gres.conf, slurm.conf, topology.conf" in written
    assert "NodeName=pair-worker1 " in (tmp_path / "slurm" / "slurm.conf").read_text()

    ok(user, "down", "pair", "--yes")
    assert not (home / ".cardhour" / "ssh" / "pair").exists()
    odd = cli(user, "launch", "--gpu", "H100:4", "--nodes", "2", "--name", "odd")
    line = one_line_error(odd, "invalid_input")
    assert "a cluster takes whole nodes: ask for H100:8 per node" in line
