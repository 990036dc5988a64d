"""A cluster on real GPUs through its gate, the agents spoken by hand: each node reports its own
all-reduce, the head (rank 0, whatever its name) the all-reduce across the nodes once every
node let the others in (`agent.nccl.cluster_probe`); an image that cannot run it across nodes
skips the cross-node NCCL check with the reason, and drains nothing."""

from __future__ import annotations

from typing import Any

import pytest

from cardhour.backends.base import LaunchSpec
from cardhour.core.readiness import modelled
from tests.api.hosts.conftest import Agent, HostsApi
from tests.api.hosts.test_containers import KEY, _get, _launch

MODEL_NAME = "NVIDIA H100 80GB HBM3"


def _running(api: HostsApi, agents: dict[str, Agent], head_probes: dict[str, str]) -> None:
    """Every node reports its container running with its keys, own key and all-reduce; once
    the control plane hands out the peers, every node reports them installed, the head with
    `head_probes`."""
    model = api.platform.catalog.model_by_id("H100")
    own = modelled.all_reduce_perf(["n"], 8, MODEL_NAME, modelled.node_busbw(model))
    specs = {name: agent.report()["containers"][0] for name, agent in agents.items()}

    def report(name: str, spec: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        probes = {"authorized_keys": spec["ssh_keys"], "cluster_key": f"ssh-ed25519 K{name}"}
        running = {"workload": spec["workload"], "state": "running", "ports": {"22": 40022}}
        return agents[name].report([running | {"probes": probes | {"all_reduce": own}} | extra])

    for name, spec in specs.items():
        report(name, spec, {})
    api.settle()
    for name, agent in agents.items():
        spec = agent.report()["containers"][0]
        assert "peers" in spec, spec  # every key in: the control plane hands them out
        extra: dict[str, Any] = {"peers": spec["peers"]["digest"]}
        if spec["rank"] == 0:
            extra["probes"] = {
                "authorized_keys": spec["ssh_keys"],
                "cluster_key": f"ssh-ed25519 K{name}",
                "all_reduce": own,
                **head_probes,
            }
        report(name, spec, extra)
    api.settle()


@pytest.fixture
def cluster(hosts_api: HostsApi) -> tuple[HostsApi, dict[str, str], dict[str, Agent], str]:
    api = hosts_api
    agents = {
        name: api.enrol(name, address=f"10.0.1.{i}", standin=False, ib_leaf="leaf1")
        for i, name in enumerate(("alpha", "beta"), start=1)
    }
    api.settle()
    user = api.signup()
    api.top_up(user, "1000.00")
    made = _launch(api, user, name="job", count=8, nodes=2)
    api.settle()
    return api, user, agents, str(made["id"])


def _nccl(api: HostsApi, user: dict[str, str], ident: str) -> dict[str, Any]:
    shown = _get(api, user, ident)
    stages = {s["name"]: s for s in shown["stages"]}  # type: ignore[attr-defined]
    return {"status": shown["status"], **stages["nccl_gate"]}


def test_the_head_s_all_reduce_across_nodes_passes_the_gate(
    cluster: tuple[HostsApi, dict[str, str], dict[str, Agent], str],
) -> None:
    api, user, agents, ident = cluster
    model = api.platform.catalog.model_by_id("H100")
    hosts = api.platform.host_book.hosts()
    fabric = modelled.fabric_busbw([api.platform.backend._node_spec(h) for h in hosts])  # type: ignore[attr-defined]
    across = modelled.all_reduce_perf(["alpha", "beta"], 8, MODEL_NAME, fabric)
    assert modelled.node_busbw(model) > fabric > 0
    _running(api, agents, {"cluster_all_reduce": across})
    nccl = _nccl(api, user, ident)
    assert (nccl["status"], nccl["outcome"]) == ("running", "ok"), nccl


def test_an_image_that_cannot_run_mpi_skips_the_check_across_nodes(
    cluster: tuple[HostsApi, dict[str, str], dict[str, Agent], str],
) -> None:
    api, user, agents, ident = cluster
    why = (
        "the image x has no mpirun or no all_reduce_perf: NCCL bandwidth across nodes not measured"
    )
    _running(api, agents, {"cluster_all_reduce_unavailable": why})
    nccl = _nccl(api, user, ident)
    assert (nccl["status"], nccl["outcome"], nccl["detail"]["why"]) == ("running", "skipped", why)
    hosts = api.client.get("/api/v1/admin/hosts", headers=api.admin).json()
    assert sorted((h["name"], h["state"]) for h in hosts) == [("alpha", "ready"), ("beta", "ready")]


def test_the_all_reduce_across_nodes_is_the_head_s_whatever_its_name(
    hosts_api: HostsApi,
) -> None:
    """The gate names the nodes in sorted order; the head is rank 0 (here `beta`)."""
    api = hosts_api
    agents = {n: api.enrol(n, standin=False, ib_leaf="leaf1") for n in ("alpha", "beta")}
    api.settle()
    eight = list(range(8))
    spec = LaunchSpec(
        "ch-job-1", "H100", 16, {"beta": eight, "alpha": eight}, "pytorch-2.3-cuda12.3", KEY,
        exclusive=True, attempt=1, instance_name="job", node_order=("beta", "alpha"),
    )  # fmt: skip
    api.platform.backend.launch(spec)
    for name, agent in agents.items():
        (wanted,) = agent.report()["containers"]
        probes = {"authorized_keys": KEY}
        if wanted["rank"] == 0:
            probes["cluster_all_reduce"] = f"measured from {name}"
        running = {"workload": wanted["workload"], "state": "running", "ports": {"22": 40022}}
        agent.report([running | {"probes": probes}])
    across = api.platform.backend.all_reduce("ch-job-1", ["alpha", "beta"], 8)  # type: ignore[attr-defined]
    assert across == "measured from beta"
