"""Docker through its CLI, for hosts without Podman: the Podman runtime with Docker's
differences (docs/dev/runtime.md).

- Docker 20.10 has no CDI. `nvidia.com/gpu=<index|uuid>` becomes `--gpus device=...` (needs the
  NVIDIA Container Toolkit); a stand-in `<kind>=<index>` becomes `--device
  /dev/null:/dev/nvidia<index>` plus `NVIDIA_VISIBLE_DEVICES` (stand-ins by UUID are refused:
  without the spec there is no index to map them to).
- `available()` asks the daemon, not only the CLI: a docker CLI without a running daemon (these
  machines) is not available.
- Exercised here only as far as `available()`: these machines run no dockerd.
"""

from __future__ import annotations

import builtins
import json
import shutil
import subprocess
from pathlib import Path

from cardhour.runtime.base import ContainerSpec, ContainerStatus, RuntimeFailure
from cardhour.runtime.engine_cli import last_line, parse_inspect
from cardhour.runtime.podman import PodmanRuntime

NVIDIA_KIND = "nvidia.com/gpu"


class DockerRuntime(PodmanRuntime):
    """Docker on this host (the daemon behind `binary`)."""

    name = "docker"

    def __init__(
        self,
        binary: str = "docker",
        entrypoint_dir: Path = Path("/var/lib/cardhour/runtime"),
        call_timeout: int = 120,
    ) -> None:
        super().__init__(binary=binary, entrypoint_dir=entrypoint_dir, call_timeout=call_timeout)

    def available(self) -> bool:
        if shutil.which(self.binary) is None:
            return False
        try:
            return self._call(["version", "--format", "{{.Server.Version}}"], 15).returncode == 0
        except RuntimeFailure:
            return False

    image_present = ("image", "inspect")
    build_flags = ()
    commit_flags = ()
    private_network_opts = ()  # Docker isolates user-defined bridge networks from each other

    def create_args(self, spec: ContainerSpec, entrypoint: list[str], cmd: list[str]) -> list[str]:
        args = super().create_args(spec, entrypoint, cmd)
        if spec.read_only_root:  # Podman mounts these tmpfs with --read-only; Docker does not
            args[:0] = ["--tmpfs", "/tmp", "--tmpfs", "/run"]
        indexes = [n.split("=", 1)[1] for n in spec.devices if not n.startswith(NVIDIA_KIND + "=")]
        if indexes and "NVIDIA_VISIBLE_DEVICES" not in spec.env:
            args[:0] = ["--env", "NVIDIA_VISIBLE_DEVICES=" + ",".join(indexes)]
        return args

    def device_args(self, devices: tuple[str, ...]) -> list[str]:
        args: list[str] = []
        nvidia = []
        for name in devices:
            kind, _, device = name.partition("=")
            if kind == NVIDIA_KIND:
                nvidia.append(device)
            elif device.isdigit():
                args += ["--device", f"/dev/null:/dev/nvidia{device}"]
            else:
                raise RuntimeFailure(f"docker has no CDI: stand-in GPU {name} needs an index")
        if nvidia:
            args += ["--gpus", f'"device={",".join(nvidia)}"']
        return args

    def list(self, labels: dict[str, str]) -> list[ContainerStatus]:
        """Names by `ps`, statuses by one `inspect` of them all (Docker's `ps` JSON differs)."""
        names = self.list_names(labels)
        if not names:
            return []
        result = self._call(["container", "inspect", *names])
        if result.returncode == 0:
            return [parse_inspect(item) for item in json.loads(result.stdout)]
        statuses = (self.inspect(name) for name in names)  # one went meanwhile
        return [status for status in statuses if status is not None]

    def list_names(self, labels: dict[str, str]) -> builtins.list[str]:
        filters = [arg for k, v in sorted(labels.items()) for arg in ("--filter", f"label={k}={v}")]
        out = self._ok(["ps", "--all", "--format", "{{.Names}}", *filters])
        return sorted(line for line in out.splitlines() if line)

    def remove(self, name: str) -> None:
        result = self._call(["rm", "--force", "--volumes", name], timeout=90)
        if result.returncode != 0 and "no such container" not in result.stderr.lower():
            raise RuntimeFailure(last_line(result.stderr))
        self._forget(name)
        self._remove_network(name)

    def engine_refused(self, result: subprocess.CompletedProcess[str]) -> bool:
        """Docker exits 1 (gone) or 126 (not running) with the daemon's error line last."""
        lines = result.stderr.strip().splitlines()
        return bool(lines) and lines[-1].startswith(("Error: No such container", "Error response"))
