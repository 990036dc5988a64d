"""A 2-node cluster on two hosts: one container per host, each holding its host whole on the
host's network; from the head, `ssh <name>-worker1` reaches the worker (the nodes let each
other in with keys made in the containers and an ssh config naming each by its hostname), and
each node has the cluster's hostfile."""

from __future__ import annotations

from pathlib import Path

from cardhour.agent import nccl
from tests.agent.conftest import Hosts, wait_for
from tests.agent.test_real_hosts import instance, keypair, renter, ssh


def test_from_the_head_ssh_reaches_the_worker_by_its_hostname(hosts: Hosts, tmp_path: Path) -> None:
    hosts.join("a", "127.0.1.7", "H100:8", ib_leaf="leaf1")  # stand-in IB: 8 rails, as H100s
    hosts.join("b", "127.0.1.8", "H100:8", ib_leaf="leaf1")
    key, public = keypair(tmp_path, "renter")
    user = renter(hosts, public)
    body = {"gpu": "H100", "count": 8, "nodes": 2, "name": "job"}
    r = hosts.call("POST", "/instances", user, json=body)
    assert r.status_code == 201, r.text
    ident = r.json()["id"]

    def settled() -> dict[str, object] | None:
        shown = instance(hosts, user, ident)
        return shown if shown["status"] in ("running", "failed") else None

    made = wait_for(settled, 120, "the cluster to run")
    assert made["status"] == "running", made["status_reason"]
    assert sorted(made["nodes"]) == [hosts.name("a"), hosts.name("b")]
    assert len(hosts.containers("a")) == len(hosts.containers("b")) == 1
    head = made["ssh"]
    login = ssh(key, head["host"], head["port"], "hostname; ssh job-worker1 hostname")
    assert login.returncode == 0, login.stderr
    assert login.stdout.split() == ["job", "job-worker1"]
    # the job's environment (torchrun's variables) on each node
    env = ssh(key, head["host"], head["port"], "ssh job-worker1 env")
    assert "NODE_RANK=1" in env.stdout and "WORLD_SIZE=16" in env.stdout, env.stderr
    assert "MASTER_ADDR=job" in env.stdout and "NCCL_IB_HCA=mlx5_0" in env.stdout
    # the hostfile DeepSpeed and Open MPI take, on every node
    files = ssh(key, head["host"], head["port"], "ssh job-worker1 'cat $CARDHOUR_HOSTFILE'")
    assert files.stdout == "job slots=8\njob-worker1 slots=8\n", files.stderr
    # and back: the worker reaches the head by its name
    hop = "ssh job-worker1 ssh job hostname"
    back = ssh(key, head["host"], head["port"], hop)
    assert back.returncode == 0 and back.stdout.strip() == "job", back.stderr
    # the gate's all-reduce across nodes, as the head's agent runs it on real GPUs: the workers
    # let the head in; these images have no mpirun, so the probe says it cannot be measured
    (box,) = [b for s in ("a", "b") for b in hosts.containers(s) if _hostname(hosts, b) == "job"]
    spec = {
        "peers": {"ssh": [{"host": "job"}, {"host": "job-worker1"}]},
        "hostname": "job",
        "gpus": list(range(8)),
        "image": "img",
    }
    probe = nccl.cluster_probe(hosts.runtime, box, spec)
    assert probe is not None and "mpirun" in probe["cluster_all_reduce_unavailable"], probe
    spec["peers"]["ssh"].append({"host": "job-worker2"})  # type: ignore[index]
    assert nccl.cluster_probe(hosts.runtime, box, spec) is None  # one node does not answer


def _hostname(hosts: Hosts, box: str) -> str:
    return hosts.runtime.exec(box, ["hostname"])[1].strip()
