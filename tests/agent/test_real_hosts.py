"""Renters' containers on real hosts: two agents join with stand-in GPUs; a launch lands on one
host as a real Podman container holding exactly its GPUs, with CPU and memory limits, ssh with
the account's key (and no other), its published port and its command; stop and down remove it;
money is charged only from `ready`; bad images fail the instance with a clear reason."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from tests.agent.conftest import Hosts, wait_for


def keypair(folder: Path, name: str) -> tuple[Path, str]:
    key = folder / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key, (folder / f"{name}.pub").read_text().strip()


def ssh(key: Path, host: str, port: int, command: str) -> subprocess.CompletedProcess[str]:
    options = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
    options += ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR"]
    argv = ["ssh", "-i", str(key), *options, "-p", str(port), f"root@{host}", command]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


def renter(hosts: Hosts, public_key: str) -> dict[str, str]:
    r = hosts.call(
        "POST",
        "/auth/signup",
        json={"email": f"{hosts.prefix}@example.com", "password": "password123"},
    )
    assert r.status_code == 201, r.text
    headers = {"Authorization": f"Bearer {r.json()['api_key']}"}
    assert (
        hosts.call("POST", "/ssh-keys", headers, json={"public_key": public_key}).status_code == 201
    )
    return headers


def card_seconds(hosts: Hosts, headers: dict[str, str], ident: str) -> int:
    """GPU-seconds charged for instance `ident` this month (its statement's usage lines)."""
    month = datetime.now(UTC).strftime("%Y-%m")
    r = hosts.call("GET", f"/statements/{month}", headers)
    assert r.status_code == 200, r.text
    return sum(int(u["card_seconds"]) for u in r.json()["usage_lines"] if u["instance_id"] == ident)


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def instance(hosts: Hosts, headers: dict[str, str], ident: str) -> dict[str, Any]:
    r = hosts.call("GET", f"/instances/{ident}", headers)
    assert r.status_code == 200, r.text
    return dict(r.json())


def settled(hosts: Hosts, headers: dict[str, str], ident: str, *states: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        found = instance(hosts, headers, ident)
        return found if found["status"] in states else None

    return dict(wait_for(check, 90, f"{ident} to be {'/'.join(states)}"))


def test_a_renter_gets_a_real_container_on_exactly_the_gpus_placed(
    hosts: Hosts, tmp_path: Path
) -> None:
    hosts.join("a", "127.0.1.2")
    hosts.join("b", "127.0.1.3")
    key, public = keypair(tmp_path, "renter")
    _, stranger = keypair(tmp_path, "stranger")
    user = renter(hosts, public)
    before = hosts.call("GET", "/balance", user).json()["available_exact"]
    r = hosts.call(
        "POST",
        "/instances",
        user,
        json={
            "gpu": "H100",
            "count": 2,
            "name": "web",
            "ports": [8888],
            "env": {"GREETING": "hello"},
            "command": "cd /tmp && echo $GREETING > index.html && exec python3 -m http.server 8888",
        },
    )
    assert r.status_code == 201, r.text
    made = settled(hosts, user, r.json()["id"], "running", "failed")
    assert made["status"] == "running", made
    (node,) = made["nodes"]
    short = node.removeprefix(f"{hosts.prefix}-")
    (name,) = hosts.containers(short)
    other = "b" if short == "a" else "a"
    assert hosts.containers(other) == []
    # exactly the placed GPUs
    nodes = hosts.call("GET", "/admin/nodes", hosts.admin).json()
    (placed,) = [n["used_gpus"] for n in nodes if n["id"] == node]
    assert len(placed) == 2
    code, listing = hosts.runtime.exec(name, ["sh", "-c", "ls /dev/nvidia*"])
    assert code == 0
    assert sorted(listing.split()) == [f"/dev/nvidia{i}" for i in sorted(placed)]
    # CPU and memory limits in proportion (a quarter of the host's), as the cgroup shows them
    code, quota = hosts.runtime.exec(name, ["cat", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"])
    assert code == 0 and int(quota) > 0
    code, memory = hosts.runtime.exec(name, ["cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes"])
    assert code == 0 and int(memory) < 2**50
    # ssh with the account's key; a key never given is refused
    address, port = made["ssh"]["host"], made["ssh"]["port"]
    assert address == ("127.0.1.2" if short == "a" else "127.0.1.3")
    login = ssh(key, address, port, "hostname; ls /dev/nvidia*")
    assert login.returncode == 0, login.stderr
    assert login.stdout.split()[0] == "web"
    stranger_key = tmp_path / "stranger"
    assert ssh(stranger_key, address, port, "true").returncode != 0
    # the requested port answers where the instance says, serving the renter's command
    served = httpx.get(f"http://{made['published']['8888']}/index.html", timeout=10)
    assert served.text.strip() == "hello"
    # stop: the container goes; the instance is billed only from ready
    assert hosts.call("POST", f"/instances/{made['id']}/stop", user).status_code == 200
    settled(hosts, user, made["id"], "stopped")
    wait_for(lambda: hosts.containers(short) == [], 30, "container removed")
    after = hosts.call("GET", "/balance", user).json()["available_exact"]
    assert after != before  # it ran, it was charged
    # charged from ready to stop: the booting seconds are free
    events = instance(hosts, user, made["id"])["events"]
    ready = next(_at(e["at"]) for e in events if e["to_status"] == "running")
    stopped = next(_at(e["at"]) for e in events if e["from_status"] == "running")
    used = card_seconds(hosts, user, made["id"])
    assert 0 < used <= 2 * ((stopped - ready).total_seconds() + 1)
    # down
    assert hosts.call("DELETE", f"/instances/{made['id']}", user).status_code in (200, 202)


def test_bad_images_fail_with_a_clear_reason_and_no_charge(hosts: Hosts, tmp_path: Path) -> None:
    hosts.join("a", "127.0.1.4", "H100:4")
    _, public = keypair(tmp_path, "renter")
    user = renter(hosts, public)
    before = hosts.call("GET", "/balance", user).json()
    cases = {
        "docker.io/library/ubuntu:22.04": (422, "not from an allowed registry"),
        "localhost/cardhour/no-such-image:1": (201, "is not on this host"),
        "localhost/cardhour/crash:latest": (201, "exited"),
        "localhost/cardhour/no-sshd:latest": (201, "has no /usr/sbin/sshd"),
    }
    for image, (status, reason) in cases.items():
        r = hosts.call("POST", "/instances", user, json={"gpu": "H100", "count": 1, "image": image})
        assert r.status_code == status, r.text
        if status != 201:
            assert reason in r.json()["error"]["message"]
            continue
        failed = settled(hosts, user, r.json()["id"], "failed", "running")
        assert failed["status"] == "failed"
        assert reason in failed["status_reason"], failed["status_reason"]
    crash = next(
        i for i in hosts.call("GET", "/instances?all=true", user).json() if "crash" in i["image"]
    )
    assert (
        "cardhour stand-in crash image" in crash["status_reason"]
        or "last output" in crash["status_reason"]
    )
    wait_for(lambda: hosts.containers("a") == [], 30, "failed containers removed")
    assert hosts.call("GET", "/balance", user).json() == before
