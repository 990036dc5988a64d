"""PodmanRuntime against real Podman and the offline images (scripts/images.sh)."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from cardhour.runtime.base import (
    LABEL_WORKLOAD,
    PRIVATE,
    ContainerSpec,
    ContainerState,
    ImageUnavailable,
    Mount,
    RuntimeFailure,
)
from cardhour.runtime.cdi import write_standin_spec
from cardhour.runtime.detect import detect
from cardhour.runtime.docker import DockerRuntime
from cardhour.runtime.engine_cli import parse_inspect, parse_ps, process_argv
from cardhour.runtime.podman import PodmanRuntime

from .conftest import BASE, CRASH, GPUS, PYTORCH, wait_for

Names = Callable[[], str]
LOOPBACK = "127.0.1.7"  # any 127.0.1.N reaches lo without setup


def test_run_is_idempotent_and_stop_remove_are_silent_when_done(
    runtime: PodmanRuntime, names: Names, host_label: dict[str, str]
) -> None:
    name, other = names(), names()
    spec = ContainerSpec(name=name, image=BASE, labels={**host_label, LABEL_WORKLOAD: name})
    first = runtime.run(spec)
    assert first.state is ContainerState.RUNNING and first.started_at
    assert first.labels[LABEL_WORKLOAD] == name
    again = runtime.run(spec)
    assert again.started_at == first.started_at  # the same container, not a new one
    runtime.run(ContainerSpec(name=other, image=BASE, labels=host_label))

    listed = runtime.list(host_label)
    assert {s.name for s in listed} >= {name, other}
    assert [s.name for s in runtime.list({**host_label, LABEL_WORKLOAD: name})] == [name]

    started = time.monotonic()
    runtime.stop(name)
    assert time.monotonic() - started < 5  # --init: SIGTERM ends `sleep infinity` at once
    stopped = runtime.inspect(name)
    assert stopped is not None and stopped.state is ContainerState.EXITED
    assert stopped.exit_code == 143
    assert runtime.run(spec).state is ContainerState.EXITED  # not restarted
    runtime.stop(name)

    runtime.remove(name)
    runtime.remove(name)
    runtime.stop(name)
    assert runtime.inspect(name) is None
    assert runtime.logs(name) == ""
    assert name not in {s.name for s in runtime.list(host_label)}


def test_logs_and_exec(runtime: PodmanRuntime, names: Names) -> None:
    name = names()
    command = "echo to-stdout; echo to-stderr >&2; exec sleep infinity"
    spec = ContainerSpec(name=name, image=BASE, command=command, env={"GREETING": "hi"})
    runtime.run(spec)
    wait_for(lambda: "to-stderr" in runtime.logs(name))
    logs = runtime.logs(name)
    assert "to-stdout" in logs
    assert runtime.exec(name, ["sh", "-c", "echo $GREETING; exit 3"]) == (3, "hi\n")
    # the renter's values never stand on the engine's command line, and their file is gone
    args = runtime.create_args(spec, [], [])
    assert "--env-file" in args and not any("GREETING" in arg for arg in args)
    runtime._env_file(name).unlink()
    assert not list((runtime.entrypoint_dir / "env").iterdir())
    runtime.remove(name)
    with pytest.raises(RuntimeFailure, match="no container"):
        runtime.exec(name, ["true"])


def test_standin_gpus_are_exactly_the_placed_ones(
    runtime: PodmanRuntime, names: Names, standin_kind_here: str
) -> None:
    name = names()
    devices = (f"{standin_kind_here}=2", f"{standin_kind_here}={GPUS[3].uuid}")  # index, UUID
    runtime.run(ContainerSpec(name=name, image=BASE, devices=devices))
    assert runtime.exec(name, ["sh", "-c", "ls /dev/nvidia*"]) == (
        0,
        "/dev/nvidia2\n/dev/nvidia3\n",
    )
    # CDI env reaches the container's process, not `podman exec` sessions
    code, env = runtime.exec(name, ["sh", "-c", "tr '\\0' '\\n' </proc/1/environ"])
    assert f"CARDHOUR_STANDIN_GPU_3={GPUS[3].uuid}" in env
    assert "CARDHOUR_STANDIN_GPU_0" not in env
    code, info = runtime.exec(name, ["cat", "/etc/cardhour/gpus/2"])
    assert f"uuid: {GPUS[2].uuid}" in info and "model: H100" in info


def test_an_unknown_device_is_reported_not_raised(runtime: PodmanRuntime, names: Names) -> None:
    status = runtime.run(ContainerSpec(name=names(), image=BASE, devices=("nope.example/gpu=1",)))
    assert status.state is ContainerState.CREATED
    assert "unresolvable CDI devices nope.example/gpu=1" in status.error


def test_cpu_and_memory_limits_show_in_the_cgroup(runtime: PodmanRuntime, names: Names) -> None:
    name = names()
    runtime.run(ContainerSpec(name=name, image=BASE, cpus=0.5, memory_mb=256))
    # cgroup v1 here (docs/dev/runtime.md); `nproc` would show the host's cores
    script = (
        "cd /sys/fs/cgroup; if [ -e cpu.max ]; then cat cpu.max memory.max;"
        " else cat cpu/cpu.cfs_quota_us cpu/cpu.cfs_period_us memory/memory.limit_in_bytes; fi"
    )
    code, out = runtime.exec(name, ["sh", "-c", script])
    assert code == 0
    assert out.split() == ["50000", "100000", "268435456"]


def test_mounts_read_only_root_and_no_network(
    runtime: PodmanRuntime, names: Names, volumes: Names, tmp_path: Path
) -> None:
    (tmp_path / "data.txt").write_text("from the host\n")
    volume = volumes()
    writer, reader = names(), names()
    mounts = (Mount(str(tmp_path), "/data"), Mount(volume, "/shared", read_only=False, volume=True))
    runtime.run(
        ContainerSpec(
            name=writer,
            image=BASE,
            command="echo written > /shared/note && exec sleep infinity",
            mounts=mounts,
            read_only_root=True,
            network="none",
            hostname="node-0",
            hosts={"node-1": "10.1.2.3"},
        )
    )
    assert runtime.exec(writer, ["cat", "/data/data.txt"]) == (0, "from the host\n")
    assert runtime.exec(writer, ["touch", "/data/x"])[0] != 0  # read-only bind
    assert runtime.exec(writer, ["touch", "/etc/x"])[0] != 0  # read-only root
    assert runtime.exec(writer, ["hostname"]) == (0, "node-0\n")
    assert "10.1.2.3" in runtime.exec(writer, ["getent", "hosts", "node-1"])[1]
    links = runtime.exec(writer, ["ip", "-o", "link"])[1]
    assert [line.split(":")[1].strip() for line in links.splitlines()] == ["lo"]

    wait_for(lambda: runtime.exec(writer, ["test", "-e", "/shared/note"])[0] == 0)
    runtime.remove(writer)  # a named volume outlives its containers
    runtime.run(ContainerSpec(name=reader, image=BASE, mounts=mounts[1:]))
    assert runtime.exec(reader, ["cat", "/shared/note"]) == (0, "written\n")


def _ssh(key: Path, port: int, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ssh", "-i", str(key), "-p", str(port), "-o", "StrictHostKeyChecking=no"]
        + ["-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5"]
        + [f"root@{LOOPBACK}", command],
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("read_only_root", [False, True], ids=["rw-root", "ro-root"])
def test_ssh_login_with_exactly_the_injected_key(
    runtime: PodmanRuntime, names: Names, tmp_path: Path, read_only_root: bool
) -> None:
    for key in ("key", "other"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / key)], check=True
        )
    name = names()
    status = runtime.run(
        ContainerSpec(
            name=name,
            image=PYTORCH,
            ssh_keys=(tmp_path / "key.pub").read_text(),
            publish_address=LOOPBACK,
            read_only_root=read_only_root,  # keys and host key then live under /run
        )
    )
    port = status.ports[22]
    wait_for(lambda: "Server listening" in runtime.logs(name))
    keys = "/run/cardhour/authorized_keys" if read_only_root else ".ssh/authorized_keys"
    login = _ssh(tmp_path / "key", port, f"cat /etc/cardhour-image; stat -c %a {keys}")
    assert login.returncode == 0, login.stderr
    assert "stand-in: true" in login.stdout and login.stdout.endswith("600\n")
    refused = _ssh(tmp_path / "other", port, "true")
    assert refused.returncode == 255 and "Permission denied" in refused.stderr


def test_ssh_on_an_image_without_sshd_says_so_and_runs_the_command(
    runtime: PodmanRuntime, names: Names, tmp_path: Path
) -> None:
    (tmp_path / "not-sshd").write_text("")  # not executable: "no sshd" to the entrypoint
    name = names()
    runtime.run(
        ContainerSpec(
            name=name,
            image=BASE,
            ssh_keys="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB k",
            command="echo the command ran; exec sleep infinity",
            mounts=(Mount(str(tmp_path / "not-sshd"), "/usr/sbin/sshd"),),
        )
    )
    wait_for(lambda: "the command ran" in runtime.logs(name))
    logs = runtime.logs(name)
    assert "this image has no /usr/sbin/sshd: SSH is not available" in logs


def test_published_port_answers_on_the_reported_host_port(
    runtime: PodmanRuntime, names: Names
) -> None:
    name = names()
    status = runtime.run(
        ContainerSpec(
            name=name,
            image=BASE,
            command="cd /etc && exec python3 -m http.server 8888",
            ports=(8888,),
            publish_address=LOOPBACK,
        )
    )
    url = f"http://{LOOPBACK}:{status.ports[8888]}/hostname"

    def fetch() -> str | None:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return str(response.read().decode())
        except OSError:
            return None

    wait_for(fetch)
    assert fetch() == runtime.exec(name, ["cat", "/etc/hostname"])[1]  # served from inside


@pytest.mark.parametrize("ssh", [False, True], ids=["plain", "behind-the-ssh-entrypoint"])
def test_crash_image_exits_and_its_logs_say_why(
    runtime: PodmanRuntime, names: Names, ssh: bool
) -> None:
    name = names()
    keys = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK5f renter" if ssh else None
    runtime.run(ContainerSpec(name=name, image=CRASH, ssh_keys=keys))
    wait_for(lambda: getattr(runtime.inspect(name), "exit_code", None) is not None)
    status = runtime.inspect(name)
    assert status is not None
    assert status.state is ContainerState.EXITED
    assert status.exit_code == 1
    assert "cardhour crash image: exiting with status 1" in runtime.logs(name)


def test_a_missing_image_raises_at_once(runtime: PodmanRuntime, names: Names) -> None:
    name = names()
    started = time.monotonic()
    with pytest.raises(ImageUnavailable, match="localhost/cardhour/missing:1 is not on this host"):
        runtime.run(ContainerSpec(name=name, image="localhost/cardhour/missing:1"))
    assert time.monotonic() - started < 2
    assert runtime.inspect(name) is None


def test_detect_prefers_podman_and_a_docker_cli_without_daemon_is_unavailable(
    runtime: PodmanRuntime,
) -> None:
    assert isinstance(detect(conf=runtime.conf), PodmanRuntime)
    assert not isinstance(detect(conf=runtime.conf), DockerRuntime)
    # these machines have a docker CLI (or none) and never a daemon
    assert DockerRuntime().available() is False


def test_cdi_dirs_outside_the_defaults_need_a_podman_that_takes_them(
    runtime: PodmanRuntime, names: Names, tmp_path: Path
) -> None:
    kind = "pytest-dirs.standin.cardhour/gpu"
    write_standin_spec(tmp_path, kind, GPUS[:2])
    custom = PodmanRuntime(conf=runtime.conf, cdi_dirs=(tmp_path,), entrypoint_dir=tmp_path)
    help_text = subprocess.run(["podman", "--help"], capture_output=True, text=True).stdout
    if "--cdi-spec-dir" not in help_text:  # Podman 4.3 (Debian 12): only /etc/cdi, /var/run/cdi
        with pytest.raises(RuntimeFailure, match="has no --cdi-spec-dir"):
            custom.inspect(names())
        return
    name = names()
    custom.run(ContainerSpec(name=name, image=BASE, devices=(f"{kind}=1",)))
    assert custom.exec(name, ["sh", "-c", "ls /dev/nvidia*"]) == (0, "/dev/nvidia1\n")


def test_the_process_is_the_images_entrypoint_then_the_command_or_its_cmd() -> None:
    wrapper = ["/opt/nvidia/nvidia_entrypoint.sh"]
    assert process_argv([], ["bash"], None) == ["sleep", "infinity"]
    assert process_argv([], ["/bin/sh", "-l"], None) == ["sleep", "infinity"]
    assert process_argv([], [], None) == ["sleep", "infinity"]
    assert process_argv(wrapper, [], None) == [*wrapper, "sleep", "infinity"]
    assert process_argv([], ["jupyter", "lab"], None) == ["jupyter", "lab"]
    assert process_argv([], ["bash", "-c", "serve"], None) == ["bash", "-c", "serve"]
    assert process_argv(wrapper, ["bash"], "python3 train.py") == [
        *wrapper,
        "sh",
        "-c",
        "python3 train.py",
    ]


def _networks(runtime: PodmanRuntime) -> set[str]:
    out = subprocess.run(
        ["podman", "network", "ls", "--format", "{{.Name}}"],
        capture_output=True,
        text=True,
        check=True,
        env=runtime._env(),
    ).stdout
    return set(out.split())


def test_private_networks_keep_containers_apart_and_go_with_them(
    runtime: PodmanRuntime, names: Names, host_label: dict[str, str]
) -> None:
    """Renters' containers on one host (`network="private"`): neither reaches the other's
    unpublished port, both still publish theirs on the host; the network goes with its
    container, also when the container could not start, and `tidy` removes one a removal cut
    short left, with an env file a `run` cut short left (not one a `run` may be reading)."""
    server, client = names(), names()
    serve = "exec python3 -m http.server 8080 --bind 0.0.0.0"
    runtime.run(
        ContainerSpec(
            server, BASE, labels=host_label, command=serve, ports=(8080,), network=PRIVATE
        )
    )
    runtime.run(ContainerSpec(client, BASE, labels=host_label, network=PRIVATE))
    assert {server, client} <= _networks(runtime)
    address = runtime.exec(server, ["sh", "-c", "hostname -I"])[1].split()[0]
    port = runtime.inspect(server).ports[8080]  # type: ignore[union-attr]
    wait_for(lambda: _answers(f"http://127.0.0.1:{port}/"))  # published: the host reaches it
    probe = f"import socket; socket.create_connection(('{address}', 8080), timeout=3)"
    code, out = runtime.exec(client, ["python3", "-c", probe])
    assert code != 0 and ("timed out" in out or "unreachable" in out), out
    code, _ = runtime.exec(server, ["python3", "-c", probe.replace(address, "127.0.0.1")])
    assert code == 0  # the server itself listens: only the other container is kept out

    runtime.remove(server)
    assert server not in _networks(runtime)
    failed = names()
    status = runtime.run(
        ContainerSpec(failed, BASE, devices=("nope.example/gpu=1",), network=PRIVATE)
    )
    assert status.error and failed in _networks(runtime)
    runtime.remove(failed)
    assert failed not in _networks(runtime)

    left = names()  # a network whose container is gone (an agent killed in between)
    runtime._private_network(left, host_label)
    stale, fresh = runtime._env_file(names()), runtime._env_file(names())
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("TOKEN=left-by-a-killed-agent\n")
    fresh.write_text("TOKEN=being-read\n")
    long_ago = time.time() - 2 * runtime.call_timeout - 1
    os.utime(stale, (long_ago, long_ago))
    runtime.tidy(host_label)
    assert left not in _networks(runtime)
    assert not stale.exists() and fresh.exists()
    fresh.unlink()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except OSError:
        return False


def test_ps_json_reads_as_inspect_does() -> None:
    """`ps` merges consecutive published ports into one entry with a `range`; start times from
    `ps` (epoch) and `inspect` (ISO, any zone, nanoseconds) compare to the second in UTC."""
    item = {
        "Names": ["c1"],
        "State": "running",
        "Labels": {"a": "b"},
        "Ports": [
            {"container_port": 22, "host_port": 40100, "range": 1, "protocol": "tcp"},
            {"container_port": 8000, "host_port": 40000, "range": 2, "protocol": "tcp"},
            {"container_port": 53, "host_port": 40053, "range": 1, "protocol": "udp"},
        ],
        "StartedAt": 1796615552,
        "Pid": 4242,
    }
    status = parse_ps(item)
    assert status.ports == {22: 40100, 8000: 40000, 8001: 40001}
    assert (status.name, status.state, status.pid) == ("c1", ContainerState.RUNNING, 4242)
    inspected = parse_inspect(
        {
            "Name": "c1",
            "State": {"Status": "running", "StartedAt": "2026-12-07T11:52:32.406838011+08:00"},
        }
    )
    assert status.started_at == inspected.started_at == "2026-12-07T03:52:32Z"
    never = parse_inspect({"Name": "c2", "State": {"Status": "created", "StartedAt": _ZERO}})
    assert never.started_at is None


_ZERO = "0001-01-01T00:00:00Z"
