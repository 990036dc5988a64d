"""The start choices of an instance whose stop kept its disk (docs/dev/storage.md), on real
hosts: two agents with one stand-in H100 each, real Podman containers, bj1 declaring a shared
storage path. Through the REST API: a start whose host's GPUs were taken meanwhile answers 409
`start_choice_needed` with the three choices (no move while no other host is free); the no-GPU
start runs from the disk with no GPU device, billed per hour at the offer's price; the move
copies the disk through the shared path to the other host, where the file is there and the
name is the same; the original disk goes once the instance runs there, the moved one at
terminate."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cardhour.core.hosts import disk_ref
from tests.agent.conftest import Hosts, HostsProcess, wait_for
from tests.agent.test_real_hosts import keypair, renter, settled
from tests.agent.test_volumes_on_hosts import _run


def _launch(hosts: Hosts, user: dict[str, str], name: str) -> str:
    r = hosts.call("POST", "/instances", user, json={"gpu": "H100", "name": name})
    assert r.status_code == 201, r.text
    running = settled(hosts, user, name, "running", "failed")
    assert running["status"] == "running", running["status_reason"]
    return str(running["nodes"][0])


@dataclass
class Keeper:
    """A renter's instance `keeper` with a file in its disk, stopped: its disk kept on `home`."""

    user: dict[str, str]
    key: Path
    ident: str
    home: str


def _stopped_keeper(hosts: Hosts, tmp_path: Path, addresses: dict[str, str]) -> Keeper:
    """Join two hosts of one stand-in H100 each at `addresses`; launch `keeper`, write
    /root/kept.txt in it, stop it."""
    for short, address in addresses.items():
        hosts.join(short, address, gpus="H100:1")
    key, public = keypair(tmp_path, "renter")
    user = renter(hosts, public)
    r = hosts.call("POST", "/instances", user, json={"gpu": "H100", "name": "keeper"})
    assert r.status_code == 201, r.text
    _run(hosts, user, key, "keeper", "echo mine > /root/kept.txt")
    home = settled(hosts, user, "keeper", "running")["nodes"][0]
    assert hosts.call("POST", "/instances/keeper/stop", user).status_code == 200
    settled(hosts, user, "keeper", "stopped")
    return Keeper(user, key, r.json()["id"], home)


def _saving(hosts: Hosts) -> bool:
    """Whether a disk is being saved into the shared path (its archive's `.part`)."""
    copies = hosts.tmp / "shared" / "disk-copies"
    return copies.is_dir() and any(copies.glob("*.part"))


def test_a_start_whose_gpus_were_taken_offers_wait_no_gpu_and_move(
    shared_hosts: Hosts, tmp_path: Path
) -> None:
    hosts = shared_hosts
    keeper = _stopped_keeper(hosts, tmp_path, {"e": "127.0.1.55", "f": "127.0.1.56"})
    user, key, ident, home = keeper.user, keeper.key, keeper.ident, keeper.home
    # both hosts' GPUs taken meanwhile
    others = {_launch(hosts, user, "taker-1"), _launch(hosts, user, "taker-2")}
    assert home in others and len(others) == 2

    r = hosts.call("POST", "/instances/keeper/start", user)
    assert r.status_code == 409, r.text
    error = r.json()["error"]
    assert error["code"] == "start_choice_needed"
    details = error["details"]
    assert details["disk_host"] == home and details["gpus_free"] is False
    assert [c["mode"] for c in details["choices"]] == ["wait", "no_gpu", "move"]
    assert details["choices"][1]["price_per_hour"] == "0.10"
    assert details["choices"][2]["available"] is False  # no other host is free
    assert settled(hosts, user, "keeper", "stopped")["status_reason"] == "released"
    r = hosts.call("POST", "/instances/keeper/start", user, json={"mode": "move"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "conflict", r.text

    # without GPUs: on its disk's host, no GPU device, the file there, per hour
    r = hosts.call("POST", "/instances/keeper/start", user, json={"mode": "no_gpu"})
    assert r.status_code == 200, r.text
    out = _run(hosts, user, key, "keeper", "cat /root/kept.txt; ls /dev | grep -c nvidia || true")
    assert out == "mine\n0\n"
    shown = settled(hosts, user, "keeper", "running")
    assert shown["nodes"] == [home] and shown["no_gpu"] is True
    assert shown["price_per_card_hour"] == "0.10"  # per hour, without GPUs
    _run(hosts, user, key, "keeper", "echo reached >> /root/kept.txt")
    assert hosts.call("POST", "/instances/keeper/stop", user).status_code == 200
    settled(hosts, user, "keeper", "stopped")

    # the other host's GPUs free again: the move is offered, estimated, and lands there
    away = next(n for n in others if n != home)
    taker = next(
        i["id"] for i in hosts.call("GET", "/instances", user).json() if away in i["nodes"]
    )
    assert hosts.call("DELETE", f"/instances/{taker}", user).status_code == 200
    settled(hosts, user, taker, "terminated")
    found = hosts.call("GET", "/instances/keeper/start-choices", user).json()
    move = found["choices"][2]
    assert move["available"] is True and move["to"] == away and move["copy_seconds"] >= 1
    r = hosts.call("POST", "/instances/keeper/start", user, json={"mode": "move"})
    assert r.status_code == 200, r.text
    assert _run(hosts, user, key, "keeper", "cat /root/kept.txt") == "mine\nreached\n"
    moved = settled(hosts, user, "keeper", "running")
    assert moved["nodes"] == [away] and moved["name"] == "keeper"
    # the original goes once it runs on the new host; the copy through the shared path too
    wait_for(lambda: hosts.runtime.image_labels(disk_ref(ident, home)) is None, 60, "the original")
    assert list((tmp_path / "shared" / "disk-copies").glob("*")) == []

    assert hosts.call("DELETE", "/instances/keeper", user).status_code == 200
    settled(hosts, user, ident, "terminated")
    wait_for(lambda: hosts.runtime.image_labels(disk_ref(ident, away)) is None, 60, "the disk")


def test_a_move_cut_short_leaves_the_original_and_a_killed_agent_resumes_it(
    shared_hosts: Hosts, tmp_path: Path
) -> None:
    hosts = shared_hosts
    addresses = {"g": "127.0.1.57", "h": "127.0.1.58"}
    keeper = _stopped_keeper(hosts, tmp_path, addresses)
    user, key, ident, home = keeper.user, keeper.key, keeper.ident, keeper.home
    home_short = home.removeprefix(f"{hosts.prefix}-")
    copies = tmp_path / "shared" / "disk-copies"

    # a stop while its disk is being saved: back to stopped with the disk where it was
    r = hosts.call("POST", "/instances/keeper/start", user, json={"mode": "move"})
    assert r.status_code == 200, r.text
    wait_for(lambda: _saving(hosts), 60, "the save to begin")
    assert hosts.call("POST", "/instances/keeper/stop", user).status_code == 200
    settled(hosts, user, "keeper", "stopped")
    choices = hosts.call("GET", "/instances/keeper/start-choices", user).json()
    assert choices["disk_host"] == home and choices["gpus_free"] is True
    assert hosts.runtime.image_labels(disk_ref(ident, home)) is not None
    wait_for(lambda: not list(copies.glob("*")), 60, "the given-up copy removed")

    # the source's agent killed while it saves: its next agent saves again, the move lands
    r = hosts.call("POST", "/instances/keeper/start", user, json={"mode": "move"})
    assert r.status_code == 200, r.text
    wait_for(lambda: _saving(hosts), 60, "the save to begin")
    hosts.kill(home_short)
    hosts.start_agent(home_short, addresses[home_short], "H100:1")
    assert _run(hosts, user, key, "keeper", "cat /root/kept.txt") == "mine\n"
    moved = settled(hosts, user, "keeper", "running")
    assert moved["nodes"] != [home], "\n".join(
        f"{e['to_status']}: {e['reason']}" for e in moved["events"]
    )
    wait_for(lambda: hosts.runtime.image_labels(disk_ref(ident, home)) is None, 60, "original")


def test_the_control_plane_killed_mid_copy_finishes_the_move_when_it_is_back(
    hosts_process: HostsProcess, tmp_path: Path
) -> None:
    """`cardhour up` itself (a process) SIGKILLed while the disk is being saved: the agents go on
    without it; the next `cardhour up` on the same database finishes the move, and the original
    goes only then."""
    hosts = hosts_process.hosts
    keeper = _stopped_keeper(hosts, tmp_path, {"i": "127.0.1.59", "j": "127.0.1.60"})
    user, key, ident, home = keeper.user, keeper.key, keeper.ident, keeper.home
    r = hosts.call("POST", "/instances/keeper/start", user, json={"mode": "move"})
    assert r.status_code == 200, r.text
    wait_for(lambda: _saving(hosts), 60, "the save")
    hosts_process.kill_and_restart()
    assert _run(hosts, user, key, "keeper", "cat /root/kept.txt") == "mine\n"
    assert settled(hosts, user, "keeper", "running")["nodes"] != [home]
    wait_for(lambda: hosts.runtime.image_labels(disk_ref(ident, home)) is None, 60, "original")
