"""Persistent volumes on real hosts (docs/dev/storage.md): two agents with stand-in GPUs run
real Podman containers; a volume is an ext4 image loop-mounted on its host. Through the REST
API: a file written in /data on instance A survives A's agent being killed and restarted (the
new agent adopts the container and its mount) and is there for instance B after A is deleted (B
is placed on the host that holds the volume); the size is enforced by the file system (ENOSPC in
the container) and another volume on the same host is untouched; a deleted volume's image is
removed by its host."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from cardhour.core.hosts import disk_ref
from tests.agent.conftest import Hosts, HostsProcess, wait_for
from tests.agent.test_real_hosts import keypair, renter, settled, ssh

ADDRESSES = {"a": "127.0.1.51", "b": "127.0.1.52"}


def _volume(hosts: Hosts, user: dict[str, str], name: str) -> dict:
    r = hosts.call("GET", f"/volumes/{name}", user)
    assert r.status_code == 200, r.text
    return dict(r.json())


def _run(hosts: Hosts, user: dict[str, str], key: Path, ident: str, command: str) -> str:
    inst = settled(hosts, user, ident, "running", "failed")
    assert inst["status"] == "running", inst["status_reason"]
    done = ssh(key, inst["ssh"]["host"], inst["ssh"]["port"], command)
    assert done.returncode == 0, (command, done.stdout, done.stderr)
    return done.stdout


def test_a_volume_outlives_its_instance_and_its_size_holds(hosts: Hosts, tmp_path: Path) -> None:
    for short, address in ADDRESSES.items():
        hosts.join(short, address)
    key, public = keypair(tmp_path, "renter")
    user = renter(hosts, public)
    for name in ("data", "other"):
        body = {"name": name, "size": "1G", "data_centre": "bj1"}
        assert hosts.call("POST", "/volumes", user, json=body).status_code == 201
    body = {"gpu": "H100", "name": "first", "volumes": ["data:/data", "other:/other"]}
    r = hosts.call("POST", "/instances", user, json=body)
    assert r.status_code == 201, r.text
    first = r.json()["id"]
    sizes = _run(hosts, user, key, "first", "df -k --output=size /data /other | tail -2")
    assert all(900_000 < int(kb) <= 1_048_576 for kb in sizes.split()), sizes
    _run(hosts, user, key, "first", "echo kept > /data/hello.txt && echo mine > /other/o.txt")
    host = settled(hosts, user, "first", "running")["nodes"][0]
    short = host.removeprefix(f"{hosts.prefix}-")

    # the agent dies with the volume mounted: its successor adopts the container and the mount
    hosts.kill(short)
    hosts.start_agent(short, ADDRESSES[short])
    wait_for(lambda: "locked again" in hosts.log(short), 30, "the mount adopted")
    assert _run(hosts, user, key, "first", "cat /data/hello.txt") == "kept\n"

    # past its size: ENOSPC inside the container, the other volume untouched
    fill = ssh(
        key,
        *(lambda i: (i["ssh"]["host"], i["ssh"]["port"]))(settled(hosts, user, "first", "running")),
        "dd if=/dev/zero of=/data/fill bs=1M count=1200 2>&1; echo rc=$?",
    )
    assert "No space left on device" in fill.stdout and "rc=0" not in fill.stdout, fill.stdout
    other = _run(
        hosts, user, key, "first", "cat /other/o.txt; df -k --output=used /other | tail -1"
    )
    assert other.split()[0] == "mine" and int(other.split()[1]) < 10_000, other
    _run(hosts, user, key, "first", "rm /data/fill")
    assert _volume(hosts, user, "data")["host"] == host

    assert hosts.call("DELETE", "/instances/first", user).status_code == 200
    settled(hosts, user, first, "terminated")
    wait_for(lambda: _volume(hosts, user, "data")["state"] == "available", 30, "data detached")

    body = {"gpu": "H100", "name": "second", "volumes": ["data:/data"]}
    r = hosts.call("POST", "/instances", user, json=body)
    assert r.status_code == 201, r.text
    second = r.json()["id"]
    assert _run(hosts, user, key, "second", "cat /data/hello.txt") == "kept\n"
    assert settled(hosts, user, "second", "running")["nodes"] == [host]  # where its data is

    assert hosts.call("DELETE", "/instances/second", user).status_code == 200
    settled(hosts, user, second, "terminated")
    images = tmp_path / f"agent-{short}" / "volumes"
    assert sorted(p.name for p in images.iterdir()) == sorted(
        f"{_volume(hosts, user, n)['id']}.ext4" for n in ("data", "other")
    )
    for name in ("data", "other"):
        wait_for(lambda n=name: _volume(hosts, user, n)["state"] == "available", 30, name)
        r = hosts.call("DELETE", f"/volumes/{name}", user)
        assert r.status_code == 200 and r.json()["state"] == "deleting", r.text
    wait_for(lambda: not list(images.iterdir()), 30, "the images removed")
    gone = hosts.call("GET", "/volumes?all=true", user).json()
    wait_for(
        lambda: (
            {v["state"] for v in hosts.call("GET", "/volumes?all=true", user).json()} == {"deleted"}
        ),
        30,
        "the volumes deleted",
    )
    assert len(gone) == 2
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(tmp_path / f"agent-{short}" / "volume-mounts") not in mounts


def test_a_stop_keeps_the_containers_disk_and_the_start_finds_it(
    hosts: Hosts, tmp_path: Path
) -> None:
    for short, address in {"c": "127.0.1.53", "d": "127.0.1.54"}.items():
        hosts.join(short, address)
    key, public = keypair(tmp_path, "renter")
    user = renter(hosts, public)
    r = hosts.call("POST", "/instances", user, json={"gpu": "H100", "name": "keeper"})
    assert r.status_code == 201, r.text
    ident = r.json()["id"]
    _run(hosts, user, key, "keeper", "echo mine > /root/kept.txt")
    node = settled(hosts, user, "keeper", "running")["nodes"][0]
    short = node.removeprefix(f"{hosts.prefix}-")
    disk = disk_ref(ident, node)

    assert hosts.call("POST", "/instances/keeper/stop", user).status_code == 200
    stopped = settled(hosts, user, "keeper", "stopped")
    assert stopped["nodes"] == [] and hosts.containers(short) == []
    assert hosts.runtime.image_labels(disk) is not None  # the disk, kept on its host

    assert hosts.call("POST", "/instances/keeper/start", user).status_code == 200
    again = settled(hosts, user, "keeper", "running", "failed")
    assert again["status"] == "running", again["status_reason"]
    assert again["nodes"] == [node]  # where its disk is
    assert _run(hosts, user, key, "keeper", "cat /root/kept.txt") == "mine\n"
    month = datetime.now(UTC).strftime("%Y-%m")
    lines = hosts.call("GET", f"/statements/{month}", user).json()["storage_lines"]
    assert [(v["volume_name"], v["kept"]) for v in lines] == [("keeper-disk", False)]
    assert lines[0]["size_gb"] >= 1  # the image's size, whole GiB: billed while it was stopped

    assert hosts.call("DELETE", "/instances/keeper", user).status_code == 200
    settled(hosts, user, ident, "terminated")
    wait_for(lambda: hosts.runtime.image_labels(disk) is None, 60, "the disk let go")


def test_the_control_plane_killed_mid_attach_and_mid_detach_loses_no_volume(
    hosts_process: HostsProcess, tmp_path: Path
) -> None:
    """`cardhour up` SIGKILLed right after a launch attached a volume (before any host mounted
    it), and again right after the instance's delete (before its host let the volume go): the
    next one brings the instance up with the volume, and a later instance finds the file."""
    hosts = hosts_process.hosts
    hosts.join("k", "127.0.1.61")
    key, public = keypair(tmp_path, "renter")
    user = renter(hosts, public)
    body = {"name": "data", "size": "1G", "data_centre": "bj1"}
    assert hosts.call("POST", "/volumes", user, json=body).status_code == 201
    r = hosts.call(
        "POST", "/instances", user, json={"gpu": "H100", "name": "a", "volumes": ["data:/data"]}
    )
    assert r.status_code == 201, r.text
    hosts_process.kill_and_restart()
    _run(hosts, user, key, "a", "echo kept > /data/hello.txt")
    assert _volume(hosts, user, "data")["state"] == "attached"

    assert hosts.call("DELETE", "/instances/a", user).status_code == 200
    hosts_process.kill_and_restart()
    wait_for(lambda: _volume(hosts, user, "data")["state"] == "available", 60, "detached")
    r = hosts.call(
        "POST", "/instances", user, json={"gpu": "H100", "name": "b", "volumes": ["data:/data"]}
    )
    assert r.status_code == 201, r.text
    assert _run(hosts, user, key, "b", "cat /data/hello.txt") == "kept\n"
