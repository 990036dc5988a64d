"""A host whose agent dies: SIGKILL the agent of the host a running instance is on; the host is
lost within the heartbeat timeout, the instance is placed again on the other host and is ready
again (SSH works there), unbilled while it was away. Restarting the dead agent (its saved
credential, no token) removes the orphaned container and duplicates nothing."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from cardhour.core.clock import as_utc
from cardhour.db.engine import transaction
from cardhour.db.models import UsageSegmentRow
from tests.agent.conftest import LOST_AFTER, Hosts, wait_for
from tests.agent.test_real_hosts import _at, card_seconds, instance, keypair, renter, ssh


def test_a_killed_agent_s_instance_runs_again_elsewhere_and_its_restart_leaves_no_orphan(
    hosts: Hosts, tmp_path: Path
) -> None:
    addresses = {"a": "127.0.1.5", "b": "127.0.1.6"}
    for short, address in addresses.items():
        hosts.join(short, address, "H100:4")
    key, public = keypair(tmp_path, "renter")
    user = renter(hosts, public)
    r = hosts.call("POST", "/instances", user, json={"gpu": "H100", "count": 2, "name": "job"})
    assert r.status_code == 201, r.text
    ident = r.json()["id"]
    first = wait_for(lambda: (i := instance(hosts, user, ident))["status"] == "running" and i, 90)
    (node,) = first["nodes"]
    gone = node.removeprefix(f"{hosts.prefix}-")
    other = "b" if gone == "a" else "a"
    (orphan,) = hosts.containers(gone)

    hosts.kill(gone)  # SIGKILL: the container keeps running, nobody reports it

    def moved() -> dict[str, object] | None:
        shown = instance(hosts, user, ident)
        on_other = shown["nodes"] == [hosts.name(other)]
        return shown if shown["status"] == "running" and on_other else None

    again = wait_for(moved, LOST_AFTER + 90, "the instance to run on the other host")
    assert hosts.host(gone)["state"] == "lost"
    assert again["ssh"]["host"] == addresses[other]
    login = ssh(key, again["ssh"]["host"], again["ssh"]["port"], "hostname")
    assert login.returncode == 0, login.stderr
    assert login.stdout.strip() == "job"
    assert hosts.containers(gone) == [orphan]  # still there: its agent is dead

    # unbilled while away: the first run's segment ends where it left `running`; nothing is
    # metered until it runs again
    events = instance(hosts, user, ident)["events"]
    ready = [_at(e["at"]) for e in events if e["to_status"] == "running"]
    left = [_at(e["at"]) for e in events if e["from_status"] == "running"]
    assert len(ready) == 2 and len(left) == 1
    with transaction(hosts.platform.sessions) as session:
        query = select(UsageSegmentRow).where(UsageSegmentRow.instance_id == ident)
        segments = [(as_utc(r.started_at), as_utc(r.ended_at)) for r in session.scalars(query)]
    assert segments == [(ready[0], left[0])]  # the second run is still running: not closed
    assert card_seconds(hosts, user, ident) > 0

    # the dead agent comes back with its saved credential: the orphan goes, nothing doubles
    hosts.start_agent(gone, addresses[gone], "H100:4")
    wait_for(lambda: hosts.host(gone).get("state") == "ready", 30, "the host to report again")
    wait_for(lambda: hosts.containers(gone) == [], 30, "the orphaned container removed")
    assert len(hosts.containers(other)) == 1
    assert instance(hosts, user, ident)["status"] == "running"


def test_a_removed_host_s_agent_removes_its_containers_and_exits(
    hosts: Hosts, tmp_path: Path
) -> None:
    hosts.join("a", "127.0.1.9", "H100:2")
    _, public = keypair(tmp_path, "renter")
    user = renter(hosts, public)
    r = hosts.call("POST", "/instances", user, json={"gpu": "H100", "count": 1})
    assert r.status_code == 201, r.text
    wait_for(lambda: instance(hosts, user, r.json()["id"])["status"] == "running", 90, "running")
    assert len(hosts.containers("a")) == 1
    removed = hosts.call("DELETE", f"/admin/hosts/{hosts.name('a')}", hosts.admin)
    assert removed.status_code == 200, removed.text
    agent = hosts.agents.pop("a")
    assert agent.wait(timeout=60) == 2  # "the control plane refused this host", one line
    assert "refused this host" in hosts.log("a")
    assert hosts.containers("a") == []  # nothing of a renter's is left running there
