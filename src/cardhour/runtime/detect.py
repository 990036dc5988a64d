"""Which engine the agent drives: Podman when it answers, else Docker when its daemon does."""

from __future__ import annotations

from pathlib import Path

from cardhour.runtime.base import ContainerRuntime, RuntimeFailure
from cardhour.runtime.docker import DockerRuntime
from cardhour.runtime.podman import PodmanRuntime


def detect(
    conf: Path | None = None,
    cdi_dirs: tuple[Path, ...] = (),
    entrypoint_dir: Path = Path("/var/lib/cardhour/runtime"),
) -> ContainerRuntime:
    """Podman (with `conf` and `cdi_dirs`) if it answers, else Docker if its daemon answers;
    RuntimeFailure when neither does."""
    podman = PodmanRuntime(conf=conf, cdi_dirs=cdi_dirs, entrypoint_dir=entrypoint_dir)
    if podman.available():
        return podman
    docker = DockerRuntime(entrypoint_dir=entrypoint_dir)
    if docker.available():
        return docker
    raise RuntimeFailure("no container engine here: podman is missing and no docker daemon answers")
