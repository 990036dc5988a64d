"""The hosts backend through the API, the agents spoken by hand: a launch becomes a wanted
container with exactly the placed GPUs, runs once its agent reports it (billed from then), a
failed container fails the instance with the agent's reason and no charge, stop and down
take the container away, and a lost host's instance is placed again on another host."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from fastapi.testclient import TestClient

from cardhour.api.app import create_app
from cardhour.backends.base import LaunchSpec
from cardhour.core.hosts import disk_ref
from cardhour.db.engine import transaction
from cardhour.db.models import InstanceRow
from cardhour.platform import Platform
from tests.api.hosts.conftest import HEARTBEAT, LOST_AFTER, Agent, HostsApi

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl t@x"


def _launch(api: HostsApi, headers: dict[str, str], **body: object) -> dict[str, object]:
    r = api.client.post(
        "/api/v1/instances",
        headers=headers,
        json={"gpu": "H100", "count": 2, "ssh_key": KEY, **body},
    )
    assert r.status_code == 201, r.text
    return dict(r.json())


def _get(api: HostsApi, headers: dict[str, str], ident: object) -> dict[str, object]:
    r = api.client.get(f"/api/v1/instances/{ident}", headers=headers)
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_a_launch_runs_as_a_container_on_its_host(hosts_api: HostsApi) -> None:
    api = hosts_api
    agent = api.enrol("box", address="10.9.9.9")
    api.settle()
    user = api.signup()
    made = _launch(
        api, user, name="job", ports=[8888], env={"A": "1"}, command="python3 -m http.server 8888"
    )
    api.settle()
    assert _get(api, user, made["id"])["status"] == "provisioning"
    wanted = agent.report()["containers"]
    assert len(wanted) == 1
    spec = wanted[0]
    assert spec["workload"].startswith("ch-")
    assert len(spec["gpus"]) == 2
    assert all(g["uuid"] == f"GPU-box-{g['index']}" for g in spec["gpus"])
    assert spec["image"] == "localhost/cardhour/pytorch-2.3-cuda12.3:latest"
    assert spec["command"] == "python3 -m http.server 8888"
    assert spec["env"] == {"A": "1"}
    assert spec["ports"] == [8888]
    assert KEY in spec["ssh_keys"]
    assert (spec["cpus"], spec["memory_mb"]) == (16, 128 * 1024)  # a quarter of the host
    assert spec["hostname"] == "job"
    balance_before = api.client.get("/api/v1/balance", headers=user).json()
    api.clock.advance(5)  # booting is not billed
    agent.run_all(ssh_port=40022, p8888=41888)
    api.settle()
    shown = _get(api, user, made["id"])
    assert shown["status"] == "running", shown
    assert shown["ssh"] == {"host": "10.9.9.9", "port": 40022, "user": "root"}
    assert shown["published"] == {"8888": "10.9.9.9:41888"}
    connection = shown["connection"]
    assert isinstance(connection, dict)
    assert connection["standin_gpus"] is True
    stages = {s["name"]: s["outcome"] for s in shown["stages"]}  # type: ignore[attr-defined]
    assert stages["keys_injected"] == "ok"
    assert stages["topology_detected"] == "ok"
    assert stages["nccl_gate"] == "ok"
    assert balance_before == api.client.get("/api/v1/balance", headers=user).json()
    # stop: the container is asked to stop keeping its disk; once the agent reports it
    # stopped, the instance is stopped, and its start is placed where the disk is
    r = api.client.post(f"/api/v1/instances/{made['id']}/stop", headers=user)
    assert r.status_code == 200, r.text
    api.settle()
    [kept] = agent.report()["containers"]
    assert kept["stopped"] is True and kept["disk"] == disk_ref(made["id"], agent.host)
    assert kept["fingerprint"] == spec["fingerprint"]  # the same container, asked to stop
    assert _get(api, user, made["id"])["status"] == "stopping"
    agent.report([{"workload": kept["workload"], "state": "stopped", "disk_gb": 3}])
    api.settle()
    assert _get(api, user, made["id"])["status"] == "stopped"
    with transaction(api.platform.sessions) as s:
        row = s.get(InstanceRow, made["id"])
        assert row is not None and row.disk_host == agent.host
    # the kept disk is storage while stopped: 3 GiB for the hour until it runs again, on
    # the same host, from the same disk; then the stopped workload is let go
    api.clock.advance(3600)
    still = [{"workload": kept["workload"], "state": "stopped", "disk_gb": 3}]
    agent.report(still)  # its host reports on: alive
    api.settle()
    r = api.client.post(f"/api/v1/instances/{made['id']}/start", headers=user)
    assert r.status_code == 200, r.text
    api.settle()
    wanted = agent.report(still)["containers"]
    [again] = [c for c in wanted if c["workload"] != kept["workload"]]
    assert again["disk"] == kept["disk"] and len(wanted) == 2  # the stopped one still wanted
    agent.report(
        [
            *still,
            {
                "workload": again["workload"],
                "state": "running",
                "ports": {"22": 40023},
                "probes": {"authorized_keys": again["ssh_keys"]},
            },
        ]
    )
    api.settle()
    assert _get(api, user, made["id"])["status"] == "running"
    api.settle()
    assert [c["workload"] for c in agent.report()["containers"]] == [again["workload"]]
    month = api.clock.now().strftime("%Y-%m")
    lines = api.client.get(f"/api/v1/statements/{month}", headers=user).json()["storage_lines"]
    assert [(v["volume_name"], v["size_gb"], v["gb_seconds"], v["kept"]) for v in lines] == [
        ("job-disk", 3, 3 * 3600, False)
    ]
    assert lines[0]["amount"] == "0.000900"  # 3 GB-hours at 0.0003
    assert api.client.get("/api/v1/volumes?all=true", headers=user).json() == []  # not a volume


def test_a_container_that_cannot_start_fails_the_instance_unbilled(hosts_api: HostsApi) -> None:
    api = hosts_api
    agent = api.enrol("box")
    api.settle()
    user = api.signup()
    before = api.client.get("/api/v1/balance", headers=user).json()
    made = _launch(api, user)
    api.settle()
    spec = agent.report()["containers"][0]
    agent.report(
        [
            {
                "workload": spec["workload"],
                "state": "exited",
                "exit_code": 1,
                "logs": "starting\nfatal: no CUDA device\n",
            }
        ]
    )
    api.settle()
    shown = _get(api, user, made["id"])
    assert shown["status"] == "failed"
    assert "exited (code 1)" in str(shown["status_reason"])
    assert "fatal: no CUDA device" in str(shown["status_reason"])
    api.settle()
    assert agent.report()["containers"] == []
    assert api.client.get("/api/v1/balance", headers=user).json() == before


def test_a_lost_host_s_instance_runs_again_on_another_host(hosts_api: HostsApi) -> None:
    api = hosts_api
    first = api.enrol("first")
    api.settle()
    user = api.signup()
    made = _launch(api, user)
    api.settle()
    first.run_all()
    api.settle()
    assert _get(api, user, made["id"])["status"] == "running"
    second = api.enrol("second")
    api.settle()
    # `first` falls silent; `second` keeps reporting
    for _ in range(LOST_AFTER // 10 + 1):
        api.clock.advance(10)
        second.report()
        api.settle()
    shown = _get(api, user, made["id"])
    assert shown["status"] == "provisioning", shown
    assert second.run_all()
    api.settle()
    shown = _get(api, user, made["id"])
    assert shown["status"] == "running"
    assert shown["nodes"] == ["second"]


def _one_box_and_a_launch(api: HostsApi) -> tuple[Agent, dict[str, str], str]:
    """Host `box` joined, a renter, and their 2-GPU launch placed on it (container wanted)."""
    agent = api.enrol("box")
    api.settle()
    user = api.signup()
    made = _launch(api, user)
    api.settle()
    return agent, user, str(made["id"])


@contextmanager
def _restarted(api: HostsApi, agent: Agent) -> Iterator[HostsApi]:
    """The control plane stopped (a crash: nothing more from it) and a new one on the same
    database and clock; the agent talks to the new one."""
    api.platform.stop()
    again = Platform(api.platform.settings, clock=api.clock)
    try:
        with TestClient(create_app(again)) as client:
            agent.client = client
            yield HostsApi(client, again, api.clock, api.admin)
    finally:
        again.stop()


def test_a_control_plane_restarted_mid_provision_finishes_the_launch_once(
    hosts_api: HostsApi,
) -> None:
    """The server dies after the container was wanted and before it ran: a new server on the
    same database (its lease on the launch expired) takes the launch over; the agent keeps the
    one container it was given and the instance runs, billed once."""
    agent, user, ident = _one_box_and_a_launch(hosts_api)
    (wanted,) = agent.report()["containers"]
    with _restarted(hosts_api, agent) as restarted:
        for _ in range(restarted.platform.settings.reconcilers.lease_seconds // HEARTBEAT + 1):
            agent.report()  # the agent heartbeats on while the dead server's lease runs out
            restarted.settle(HEARTBEAT)
        (still,) = agent.report()["containers"]
        assert still["workload"] == wanted["workload"]
        assert still["fingerprint"] == wanted["fingerprint"]  # kept, not replaced
        agent.run_all()
        restarted.settle()
        shown = _get(restarted, user, ident)
        assert shown["status"] == "running", shown
        assert [e["to_status"] for e in shown["events"]].count("running") == 1
        assert len(agent.report()["containers"]) == 1


def test_hosts_are_not_lost_while_a_restarted_control_plane_waits_for_their_agents(
    hosts_api: HostsApi,
) -> None:
    """A control plane down for longer than the heartbeat timeout (an upgrade) gives agents a
    timeout's time to find it again before it calls any host lost: nothing is replaced."""
    agent, user, ident = _one_box_and_a_launch(hosts_api)
    agent.run_all()
    hosts_api.settle()
    assert _get(hosts_api, user, ident)["status"] == "running"
    hosts_api.clock.advance(3 * LOST_AFTER)  # the control plane is down for two minutes
    with _restarted(hosts_api, agent) as restarted:
        restarted.settle(HEARTBEAT)
        assert _get(restarted, user, ident)["status"] == "running"
        agent.run_all()  # the agent is back within the timeout
        restarted.settle(LOST_AFTER)
        agent.run_all()
        restarted.settle(HEARTBEAT)
        shown = _get(restarted, user, ident)
        assert shown["status"] == "running" and shown["nodes"] == ["box"]
        assert [e["to_status"] for e in shown["events"]].count("running") == 1


def test_an_image_without_nccl_tests_skips_the_nccl_check_and_drains_nothing(
    hosts_api: HostsApi,
) -> None:
    """On real GPUs the agent runs `all_reduce_perf` in the container; a renter's image without
    it (the agent reports `all_reduce_unavailable`) is not the host's fault: the NCCL check is
    `skipped` with the reason, the instance runs, and the host stays in the fleet."""
    api = hosts_api
    agent = api.enrol("gpu1", address="10.9.9.8", standin=False)
    api.settle()
    user = api.signup()
    made = _launch(api, user)
    api.settle()
    (spec,) = agent.report()["containers"]
    why = "the image x has no all_reduce_perf (nccl-tests): NCCL bandwidth not measured"
    probes = {"authorized_keys": spec["ssh_keys"], "all_reduce_unavailable": why}
    running = {"workload": spec["workload"], "state": "running", "ports": {"22": 40022}}
    agent.report([running | {"probes": probes}])
    api.settle()
    shown = _get(api, user, made["id"])
    assert shown["status"] == "running", shown
    stages = {s["name"]: s for s in shown["stages"]}  # type: ignore[attr-defined]
    assert stages["nccl_gate"]["outcome"] == "skipped"
    assert stages["nccl_gate"]["detail"]["why"] == why
    hosts = api.client.get("/api/v1/admin/hosts", headers=api.admin).json()
    assert [(h["name"], h["state"]) for h in hosts] == [("gpu1", "ready")]


def test_a_cluster_node_keeps_its_rank_when_another_is_replaced(hosts_api: HostsApi) -> None:
    """The ranks follow the instance's node order (a replacement takes the rank of the node it
    replaced): the survivor's spec, hostname and rank included, does not change, so its agent
    keeps its container running."""
    api = hosts_api
    alpha, beta, gamma = api.enrol("alpha"), api.enrol("beta"), api.enrol("gamma")
    api.settle()
    backend = api.platform.backend
    eight = list(range(8))
    spec = LaunchSpec(
        "ch-job-1", "H100", 16, {"alpha": eight, "beta": eight}, "pytorch-2.3-cuda12.3", KEY,
        exclusive=True, attempt=1, instance_name="job",
    )  # fmt: skip
    backend.launch(spec)
    (head,) = alpha.report()["containers"]
    (worker,) = beta.report()["containers"]
    assert (head["hostname"], head["rank"], worker["hostname"], worker["rank"]) == (
        "job", 0, "job-worker1", 1,
    )  # fmt: skip
    # alpha is lost: gamma takes its slot, the head's rank (the order the readiness path keeps)
    again = replace(
        spec, gpus_by_node={"gamma": eight, "beta": eight}, attempt=2, node_order=("gamma", "beta")
    )
    backend.launch(again)
    assert alpha.report()["containers"] == []
    (new_head,) = gamma.report()["containers"]
    (kept,) = beta.report()["containers"]
    assert (new_head["hostname"], new_head["rank"]) == ("job", 0)
    assert (kept["hostname"], kept["rank"]) == ("job-worker1", 1)
    assert kept["fingerprint"] == worker["fingerprint"]  # its container is kept as it runs
