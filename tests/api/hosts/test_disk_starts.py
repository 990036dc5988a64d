"""The start choices of an instance whose stop kept its disk, with the hosts backend and the
agent spoken by hand (`tests/agent/test_disk_starts_on_hosts.py` runs them on real hosts):
the API's 409 and the console's choice buttons while the disk's host is full, no move without
a shared storage path, the no-GPU start's spec (no GPU, its disk), its charge per hour (exact,
at the offer's price, no GPU card time, 0 GPUs on the statement), bad modes refused."""

from __future__ import annotations

import re

from cardhour.db.engine import transaction
from cardhour.db.models import InstanceRow
from cardhour.services.billing import ledger, metering
from tests.api.hosts.conftest import LOST_AFTER, Agent, HostsApi

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl t@x"


def _running(api: HostsApi, user: dict[str, str], name: str) -> dict:
    r = api.client.post(
        "/api/v1/instances", headers=user, json={"gpu": "H100", "name": name, "ssh_key": KEY}
    )
    assert r.status_code == 201, r.text
    return dict(r.json())


def _stopping_keeper(api: HostsApi, user: dict[str, str]) -> tuple[Agent, dict, dict]:
    """Enrol host `box` (one H100), run `keeper` on it and stop it: (its agent, the instance,
    the spec its agent was asked to stop keeping its disk)."""
    agent = api.enrol("box", count=1, address="10.9.9.9")
    api.settle()
    made = _running(api, user, "keeper")
    api.settle()
    agent.run_all()
    api.settle()
    assert api.client.post("/api/v1/instances/keeper/stop", headers=user).status_code == 200
    api.settle()
    [kept] = agent.report()["containers"]
    return agent, made, kept


def test_a_full_host_offers_the_choices_and_the_no_gpu_start_is_billed_per_hour(
    hosts_api: HostsApi,
) -> None:
    api = hosts_api
    email = "keeper@example.com"
    user = api.signup(email)
    agent, made, kept = _stopping_keeper(api, user)
    stopped = [{"workload": kept["workload"], "state": "stopped", "disk_gb": 2}]
    agent.report(stopped)
    api.settle()
    _running(api, user, "taker")  # takes the one GPU of box
    api.settle()

    for mode in ("sideways", 3):
        bad = api.client.post("/api/v1/instances/keeper/start", headers=user, json={"mode": mode})
        assert bad.status_code == 422, bad.text
    r = api.client.post("/api/v1/instances/keeper/start", headers=user)
    assert r.status_code == 409 and r.json()["error"]["code"] == "start_choice_needed", r.text
    move = r.json()["error"]["details"]["choices"][2]
    assert move["available"] is False and "no shared storage path" in move["detail"]
    r = api.client.post("/api/v1/instances/keeper/start", headers=user, json={"mode": "move"})
    assert r.status_code == 409 and "no shared storage path" in r.json()["error"]["message"]

    # the console: the same choices as buttons, the move said to be unavailable
    signed = api.client.post("/signin", data={"email": email, "password": "password123"})
    assert signed.status_code == 200, signed.text
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', signed.text)
    assert match
    csrf = match.group(1)
    page = api.client.post(f"/instances/{made['id']}/start", data={"csrf": csrf})
    assert page.status_code == 409
    assert 'data-testid="start-wait"' in page.text and 'data-testid="start-no_gpu"' in page.text
    assert 'data-testid="start-move"' not in page.text and "no shared storage path" in page.text
    assert "0.10 CNY per hour" in page.text
    chosen = api.client.post(
        f"/instances/{made['id']}/start",
        data={"csrf": csrf, "mode": "no_gpu"},
        follow_redirects=False,
    )
    assert chosen.status_code == 303, chosen.text
    api.settle()

    # placed on box with no GPU, from its disk; runs without the readiness gate
    wanted = {c["workload"]: c for c in agent.report(stopped)["containers"]}
    mine = f"ch-{made['id']}-"
    [spec] = [c for w, c in wanted.items() if w.startswith(mine) and w != kept["workload"]]
    assert spec["gpus"] == [] and spec["disk"] == kept["disk"]
    assert spec["cpus"] == 0.5 and spec["memory_mb"] == 512
    running = {"workload": spec["workload"], "state": "running", "ports": {"22": 40030}}
    agent.report([*stopped, running | {"probes": {"authorized_keys": spec["ssh_keys"]}}])
    api.settle()
    shown = api.client.get("/api/v1/instances/keeper", headers=user).json()
    assert shown["status"] == "running", shown["status_reason"]
    assert shown["no_gpu"] is True and shown["nodes"] == ["box"]
    assert shown["price_per_card_hour"] == "0.10"

    api.settle(3600)  # an hour without GPUs: 0.10, not a card-hour of H100
    assert api.client.post("/api/v1/instances/keeper/stop", headers=user).status_code == 200
    api.settle()
    month = api.clock.now().strftime("%Y-%m")
    lines = api.client.get(f"/api/v1/statements/{month}", headers=user).json()["usage_lines"]
    [line] = [u for u in lines if u["instance_name"] == "keeper" and u["gpu_count"] == 0]
    assert line["amount"] == "0.100000" and line["card_seconds"] == 3600
    with transaction(api.platform.sessions) as s:
        row = s.get(InstanceRow, made["id"])
        assert row is not None and row.billed_micros >= 100_000
        assert metering.usage_until(row, api.clock.now()) == row.usage_closed  # no card time
        assert ledger.verify(s).balanced


def test_a_kept_disk_whose_owner_runs_out_of_money_goes_with_its_instance_after_retention(
    hosts_api: HostsApi,
) -> None:
    api = hosts_api
    user = api.signup()  # 10.00 CNY of trial credit
    agent, made, kept = _stopping_keeper(api, user)
    agent.report([{"workload": kept["workload"], "state": "stopped", "disk_gb": 10240}])
    api.settle()  # 10 TiB kept: 3.072 CNY an hour
    api.settle(4 * 3600)
    api.settle(60)
    notices = [n["subject"] for n in api.client.get("/api/v1/notifications", headers=user).json()]
    assert any(s.startswith("Top up to keep your volumes") for s in notices)
    api.settle(14 * 86400)
    api.settle(60)
    assert _status(api, user, made["id"]) == "stopped"  # kept, and charged, 15 days
    api.settle(86400)
    api.settle(60)
    shown = api.client.get(f"/api/v1/instances/{made['id']}", headers=user).json()
    assert shown["status"] == "terminated"
    assert shown["status_reason"].startswith("terminated after 15 days without money")
    notices = [n["subject"] for n in api.client.get("/api/v1/notifications", headers=user).json()]
    assert "Instance keeper was terminated" in notices
    api.settle()
    assert agent.report()["containers"] == []  # its host lets the disk go
    with transaction(api.platform.sessions) as s:
        row = s.get(InstanceRow, made["id"])
        assert row is not None and row.disk_host is None
        assert ledger.verify(s).balanced


def _status(api: HostsApi, user: dict[str, str], ident: str) -> str:
    return str(api.client.get(f"/api/v1/instances/{ident}", headers=user).json()["status"])


def test_a_stop_whose_disk_cannot_be_kept_says_why_and_keeps_trying(hosts_api: HostsApi) -> None:
    api = hosts_api
    user = api.signup()
    agent, made, kept = _stopping_keeper(api, user)
    full = "cannot keep its disk: no space left on device"
    agent.report([{"workload": kept["workload"], "state": "pending", "error": full}])
    api.settle(5)
    shown = api.client.get(f"/api/v1/instances/{made['id']}", headers=user).json()
    assert shown["status"] == "stopping" and shown["status_reason"] == f"stopping: {full}"
    agent.report([{"workload": kept["workload"], "state": "stopped", "disk_gb": 1}])
    api.settle(5)
    assert _status(api, user, made["id"]) == "stopped"  # kept once the agent could


def test_a_chosen_wait_earns_no_sla_credit_and_no_gpu_needs_the_host_up(
    hosts_api: HostsApi,
) -> None:
    api = hosts_api
    user = api.signup()
    agent, made, kept = _stopping_keeper(api, user)
    stopped = {"workload": kept["workload"], "state": "stopped", "disk_gb": 1}
    agent.report([stopped])
    api.settle()
    taker = _running(api, user, "taker")
    api.settle()
    [spec] = [c for c in agent.report([stopped])["containers"] if c["workload"] != kept["workload"]]
    its = {"workload": spec["workload"], "state": "running", "ports": {"22": 40032},
           "probes": {"authorized_keys": spec["ssh_keys"]}}  # fmt: skip
    agent.report([stopped, its])
    api.settle()
    assert _status(api, user, taker["id"]) == "running"
    r = api.client.post("/api/v1/instances/keeper/start", headers=user, json={"mode": "wait"})
    assert r.status_code == 200, r.text
    for _ in range(40):  # 20 minutes waiting for box, past the 15-minute SLA window
        agent.report([stopped, its])
        api.settle(30)
    assert _status(api, user, made["id"]) == "pending"
    assert api.client.delete(f"/api/v1/instances/{taker['id']}", headers=user).status_code == 200
    api.settle()
    mine = f"ch-{made['id']}-"
    for _ in range(3):
        wanted = agent.report([stopped])["containers"]
        fresh = [c for c in wanted if c["workload"].startswith(mine) and c is not None]
        reports = [stopped] + [
            {"workload": c["workload"], "state": "running", "ports": {"22": 40031},
             "probes": {"authorized_keys": c["ssh_keys"]}}
            for c in fresh if c["workload"] != kept["workload"]
        ]  # fmt: skip
        agent.report(reports)
        api.settle()
    shown = api.client.get(f"/api/v1/instances/{made['id']}", headers=user).json()
    assert shown["status"] == "running", shown["status_reason"]
    assert not any("SLA" in (e["reason"] or "") for e in shown["events"])  # the owner chose

    # a start without GPUs needs its disk's host up
    assert api.client.post("/api/v1/instances/keeper/stop", headers=user).status_code == 200
    api.settle()
    again = [c for c in agent.report()["containers"] if c["workload"].startswith(mine)]
    agent.report([{"workload": c["workload"], "state": "stopped", "disk_gb": 1} for c in again])
    api.settle()
    assert _status(api, user, made["id"]) == "stopped"
    api.settle(LOST_AFTER + 5)  # box stops reporting
    r = api.client.post("/api/v1/instances/keeper/start", headers=user, json={"mode": "no_gpu"})
    assert r.status_code == 409 and "is not up" in r.json()["error"]["message"], r.text
