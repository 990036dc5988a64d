"""The container runtime contract the host agent converges with.

Every call is keyed by the container's deterministic name (the agent's `<workload>.<host>`):
`run` of a name that exists returns its status and starts nothing; `stop`/`remove` of a name
that is gone return silently. Engines raise only the errors below, with a message fit to show a
renter (the engine's own last line, never a traceback).
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import StrEnum

#: label every container the agent makes carries; its value is the agent's host name
LABEL_HOST = "org.cardhour.host"
#: the instance's external name (`ch-<instance>-<attempt>`) a container belongs to
LABEL_WORKLOAD = "org.cardhour.workload"


#: `ContainerSpec.network` for a container on a network of its own, named as it is
PRIVATE = "private"


class RuntimeFailure(Exception):
    """The engine could not do what was asked (not reachable, bad spec); retry may help."""


class ImageUnavailable(RuntimeFailure):
    """The image does not exist locally and cannot be pulled: the workload cannot start."""


@dataclass(frozen=True)
class Mount:
    """A host path (or named volume, when `volume`) mounted at `target` in the container."""

    source: str
    target: str
    read_only: bool = True
    volume: bool = False


@dataclass(frozen=True)
class ContainerSpec:
    """One container, as the agent wants it.

    `devices`: CDI device names (`nvidia.com/gpu=<uuid>` on real hosts, the stand-in vendor's on
    test machines), exactly the GPUs placed. `ssh_keys`: when set, the container runs sshd on
    port 22 with exactly these keys (key login only), published on `publish_address`.
    `ports`: container ports published on `publish_address` at free host ports. `command`:
    the renter's command (`sh -c`, after the image's ENTRYPOINT); none: the image's own CMD,
    or idle until stopped when that is empty or a bare shell (`engine_cli.process_argv`). `hosts`:
    extra `/etc/hosts` entries (a cluster's nodes). `network="host"` (a cluster node, which
    holds its host whole): the host's network, nothing published; the ports are the host's,
    and sshd listens on `publish_address:ssh_port`.
    """

    name: str
    image: str
    labels: dict[str, str] = field(default_factory=dict)
    command: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    devices: tuple[str, ...] = ()
    cpus: float | None = None
    memory_mb: int | None = None
    ports: tuple[int, ...] = ()
    publish_address: str = "127.0.0.1"
    ssh_keys: str | None = None
    mounts: tuple[Mount, ...] = ()
    hosts: dict[str, str] = field(default_factory=dict)
    hostname: str | None = None
    read_only_root: bool = False
    #: None: the engine's default bridge (every container on it can reach the others);
    #: "private": a network of its own, isolated from the other containers' (renters');
    #: "none": no network; "host": the host's
    network: str | None = None
    ssh_port: int | None = None  # with network="host": where sshd listens
    user: str | None = None  # `uid:gid` the process runs as (None: the image's user)
    pids_limit: int | None = None  # at most this many processes and threads
    unprivileged: bool = False  # every capability dropped, no privileges gained by exec
    #: run `image` (a container's disk kept by `commit`) with the ENTRYPOINT and CMD of this
    #: image instead (the renter's own: a commit keeps the platform's entrypoint in its config)
    config_image: str | None = None


class ContainerState(StrEnum):
    CREATED = "created"
    RUNNING = "running"
    EXITED = "exited"  # stopped or its process ended; `exit_code` says which


@dataclass(frozen=True)
class ContainerStatus:
    name: str
    state: ContainerState
    labels: dict[str, str] = field(default_factory=dict)
    exit_code: int | None = None
    #: container port -> host port, for 22 (sshd) and every published port
    ports: dict[int, int] = field(default_factory=dict)
    started_at: str | None = None  # the engine's timestamp, ISO 8601
    error: str = ""  # the engine's reason when it could not start the process
    pid: int | None = None  # its first process on this host, while running


class ContainerRuntime(ABC):
    """One engine on one host."""

    name: str

    @abstractmethod
    def available(self) -> bool:
        """The engine answers here (its CLI exists and, for Docker, its daemon runs)."""

    @abstractmethod
    def ensure_image(self, ref: str) -> None:
        """The image is here (pulled when missing); ImageUnavailable when it cannot be."""

    @abstractmethod
    def build(self, context: str, tag: str, labels: dict[str, str]) -> None:
        """Build the image of `context`'s Containerfile as `tag`, with `labels`, from local
        images only and with no network; RuntimeFailure with the build's last line."""

    @abstractmethod
    def image_labels(self, ref: str) -> dict[str, str] | None:
        """The labels of image `ref`; None when it is not here."""

    @abstractmethod
    def commit(self, name: str, ref: str) -> None:
        """Keep container `name`'s file system (its image and every change made in it, not
        its mounts) as image `ref`, with the container's labels, replacing an image of that
        name. RuntimeFailure when the container is gone."""

    @abstractmethod
    def remove_image(self, ref: str) -> None:
        """Remove image `ref`; silent when it is not here."""

    @abstractmethod
    def image_size(self, ref: str) -> int | None:
        """Image `ref`'s size in bytes (its layers, shared ones included); None when not here."""

    @abstractmethod
    def images(self, repository: str, labels: dict[str, str]) -> builtins.list[str]:
        """The references (`repository/name:tag`) of the images here under `repository` that
        carry all of `labels` (a commit keeps the container's labels)."""

    @abstractmethod
    def image_layers(self, ref: str) -> int | None:
        """How many layers image `ref` has; None when it is not here."""

    @abstractmethod
    def squash(self, ref: str) -> None:
        """Make image `ref` one layer (its files and config as they are), under the same
        name; the deep one it replaces is removed. RuntimeFailure (`ref` left as it is) when
        it fails or `ref` was made anew meanwhile."""

    @abstractmethod
    def tag(self, ref: str, new_ref: str) -> None:
        """Give image `ref` the name `new_ref` too. RuntimeFailure when `ref` is not here."""

    @abstractmethod
    def save(self, ref: str, path: str) -> None:
        """Write image `ref` (its layers and name) to the archive `path`."""

    @abstractmethod
    def load(self, path: str) -> str:
        """Load the archive `path` (`save`'s); the reference it named."""

    @abstractmethod
    def run_once(self, image: str, argv: builtins.list[str], timeout: int = 60) -> tuple[int, str]:
        """Run `argv` in a throwaway container of `image` (no network, read-only root):
        (exit code, output). RuntimeFailure when the engine cannot run it."""

    @abstractmethod
    def run(self, spec: ContainerSpec) -> ContainerStatus:
        """Create and start `spec.name`; a name that exists is left as it is and its status
        returned (a stopped one is not restarted)."""

    @abstractmethod
    def inspect(self, name: str) -> ContainerStatus | None:
        """The container's status; None when no container of that name exists."""

    @abstractmethod
    def list(self, labels: dict[str, str]) -> list[ContainerStatus]:
        """Every container (running or not) carrying all of `labels`."""

    @abstractmethod
    def stop(self, name: str, timeout: int = 10) -> None:
        """Stop it (SIGTERM, SIGKILL after `timeout` s); silent when gone or stopped."""

    @abstractmethod
    def remove(self, name: str) -> None:
        """Remove it, stopping it first, and its private network; silent when gone."""

    @abstractmethod
    def tidy(self, labels: dict[str, str]) -> None:
        """Remove what a `run` or `remove` cut short left behind (the agent killed in between):
        the private networks carrying all of `labels` that no container uses, and the files
        of renters' variables written for a `run` that can no longer be reading them."""

    @abstractmethod
    def logs(self, name: str, lines: int = 20) -> str:
        """Its last `lines` lines of output (stdout and stderr); "" when gone."""

    @abstractmethod
    def exec(self, name: str, argv: builtins.list[str], timeout: int = 60) -> tuple[int, str]:
        """Run `argv` inside the running container: (exit code, stdout and stderr)."""
