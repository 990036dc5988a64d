"""Replicas as containers (`ContainerLauncher`, a `runtime.Launcher`): the default, because an
app is a developer's code and untrusted code runs only inside containers.

- **Image per app version** (`backends.apps.image`: its build context), built once (under the
  version's lock) on its first replica or when the apps reconciler `prepare`s it; an image
  whose build label (`core.replicas.build_key`) differs is stale and rebuilt.
- **Replica**: that image with a read-only root (tmpfs `/tmp`, `/run`), `--network none`,
  user 65534 with every capability dropped, `--cpus` (`core.apps.REPLICA_CPU_MILLI`, as
  placed), `--memory` (the manifest's `resources.memory_gb`, as placed), `--pids-limit` (256).
  Its runner listens on a Unix socket in a folder of this host (`$XDG_RUNTIME_DIR` or `/run`,
  else the temporary folder; owned by 65534, mode 0700) mounted at `/run/cardhour`: the
  gateway calls it there, and nothing else can reach it. Ready when `GET /healthz` answers on
  the socket; a replica that exits first is `Unavailable` with its last log lines.
- Containers are named `ch-app-<version>-<n>` and labelled with this launcher's folder: at
  construction, replicas a previous process of the same data dir left are removed (their share
  of the fleet lapsed with it).

`missing` knows what a replica would lack without building: the base image's distributions
(asked once) and the wheelhouse's wheels (`<name>-<version>-….whl`).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import zipfile
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from cardhour.backends.apps import image as app_image
from cardhour.backends.apps.image import normalise, slug, wheels_in
from cardhour.backends.apps.process import missing as missing_from
from cardhour.core.apps import REPLICA_CPU_MILLI
from cardhour.core.errors import Unavailable
from cardhour.core.replicas import (
    LABEL_BUILD,
    LABEL_VERSION,
    REPLICA_SOCKET,
    REPLICA_USER,
    AppSpec,
    Placed,
    replica_env,
)
from cardhour.runtime import replicas
from cardhour.runtime.base import (
    ContainerRuntime,
    ImageUnavailable,
    RuntimeFailure,
)
from cardhour.runtime.detect import detect
from cardhour.runtime.podman import PodmanRuntime
from cardhour.runtime.replicas import runtime_folder, socket_folder

log = logging.getLogger("cardhour.apps")

LABEL_DIR = "org.cardhour.apps-dir"  # which launcher folder a replica's socket is in

_DISTRIBUTIONS = (
    "import importlib.metadata as m, json; "
    "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
)


@dataclass
class ContainerReplica:
    """A replica's handle: its container and the host folder of its socket."""

    name: str
    socket_dir: Path
    pid: int | None


class ContainerLauncher:
    """`runtime.Launcher` of containers on `engine` (module docstring). `base_image`: what app
    images are built from; `wheelhouse`: the only source of requirements the base lacks."""

    def __init__(
        self,
        engine: ContainerRuntime,
        work_dir: Path,
        base_image: str,
        wheelhouse: Path | None = None,
        pids_limit: int = 256,
        start_timeout: float = 30.0,
    ) -> None:
        self.engine, self.base_image, self.wheelhouse = engine, base_image, wheelhouse
        self.pids_limit, self.start_timeout = pids_limit, start_timeout
        self.work_dir = work_dir
        # a socket path must stay under 108 bytes: a short folder, not under the data dir;
        # the user's runtime folder (or /run) rather than /tmp, which others may write in
        self.dir_label = hashlib.sha256(str(work_dir.resolve()).encode()).hexdigest()[:12]
        self._sockets = runtime_folder() / f"cardhour-apps-{self.dir_label}"
        self._counter = itertools.count(1)
        self._base_distributions: dict[str, str] | None = None
        self._built: set[str] = set()
        self._lock = threading.Lock()
        self.remove_left_over()

    # -- the Launcher -----------------------------------------------------------------------

    def start(self, spec: AppSpec, placed: Placed | None) -> tuple[ContainerReplica, str]:
        image = self.image(spec)
        name = f"ch-app-{slug(spec.key)}-{os.getpid()}-{next(self._counter)}"
        try:
            socket_dir = socket_folder(self._sockets, name, REPLICA_USER)
        except OSError as exc:
            raise Unavailable(f"replica of {spec.key} cannot start: {exc}") from exc
        container = replicas.spec(
            name,
            image,
            {LABEL_DIR: self.dir_label, LABEL_VERSION: spec.key},
            replica_env(placed),
            REPLICA_CPU_MILLI / 1000,
            spec.resources.memory_gb * 1024,
            socket_dir,
            self.pids_limit,
        )
        try:
            status = self.engine.run(container)
            replica = ContainerReplica(name, socket_dir, status.pid)
            if status.error:
                raise Unavailable(f"replica of {spec.key} did not start: {status.error}")
            self._wait_ready(spec, replica)
        except ImageUnavailable as exc:  # removed since it was built: build it again next time
            self._built.discard(image)
            self._remove(name, socket_dir)
            raise Unavailable(f"replica of {spec.key} did not start: {exc}") from exc
        except (RuntimeFailure, OSError) as exc:
            self._remove(name, socket_dir)
            raise Unavailable(f"replica of {spec.key} did not start: {exc}") from exc
        except BaseException:
            self._remove(name, socket_dir)
            raise
        return replica, str(socket_dir / REPLICA_SOCKET)

    def alive(self, handle: ContainerReplica) -> bool:
        """Whether its first process still runs (a signal-0 check, no engine call)."""
        if handle.pid is None:
            return False
        try:
            os.kill(handle.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # rootless: the engine's user namespace owns it
            return True
        return True

    def stop(self, handle: ContainerReplica) -> None:
        self._remove(handle.name, handle.socket_dir)

    def stop_all(self) -> None:
        self.remove_left_over()
        with contextlib.suppress(OSError):  # its folder too, once empty
            self._sockets.rmdir()

    def missing(self, requirements: Collection[str]) -> list[str]:
        """The requirements neither the base image nor the wheelhouse has (a base image that
        cannot be read lacks everything: the replica would not start)."""
        wheels = wheels_in(self.wheelhouse)
        try:
            base = self._base()
        except RuntimeFailure as exc:
            return [f"{line} ({exc})" for line in requirements]

        def installed(name: str) -> str | None:
            key = normalise(name)
            return wheels[key][0] if key in wheels else base.get(key)

        return missing_from(requirements, installed)

    # -- images ------------------------------------------------------------------------------

    def prepare(self, spec: AppSpec) -> None:
        """Build the version's image when it is missing or stale (the runtime holds the
        version's lock); Unavailable when it cannot be built."""
        self.image(spec)

    def image(self, spec: AppSpec) -> str:
        """The version's image (`prepare`d: built at most once by this launcher); its tag."""
        tag = app_image.tag(spec)
        if tag in self._built:
            return tag
        try:
            digest = app_image.digest(spec, self.base_image)
            key, current = replicas.build_state(self.engine, tag, self.base_image, digest)
            if not current:
                self._build(spec, tag, key)
        except (RuntimeFailure, OSError) as exc:
            raise Unavailable(f"replica of {spec.key} cannot start: {exc}") from exc
        self._built.add(tag)
        return tag

    def _build(self, spec: AppSpec, tag: str, key: str) -> None:
        started = time.monotonic()
        context = Path(tempfile.mkdtemp(prefix="build-", dir=self._work()))
        try:
            app_image.write_context(spec, self.base_image, self.wheelhouse, context)
            self.engine.build(str(context), tag, {LABEL_BUILD: key, LABEL_VERSION: spec.key})
        except (OSError, zipfile.BadZipFile) as exc:
            raise Unavailable(f"replica of {spec.key} cannot start: {exc}") from exc
        finally:
            shutil.rmtree(context, ignore_errors=True)
        log.info("built %s in %.1fs", tag, time.monotonic() - started)

    def _base(self) -> dict[str, str]:
        """The base image's distributions (normalised name → version), asked once."""
        with self._lock:
            if self._base_distributions is None:
                code, out = self.engine.run_once(self.base_image, ["python3", "-c", _DISTRIBUTIONS])
                if code != 0:
                    last = out.strip().splitlines()[-1:] or ["no output"]
                    raise RuntimeFailure(f"cannot read {self.base_image}: {last[0]}")
                try:
                    found = json.loads(out.strip().splitlines()[-1])
                    self._base_distributions = {normalise(k): v for k, v in found.items()}
                except (ValueError, IndexError, AttributeError) as exc:
                    raise RuntimeFailure(f"cannot read {self.base_image}'s packages") from exc
            return self._base_distributions

    # -- replicas ---------------------------------------------------------------------------

    def _wait_ready(self, spec: AppSpec, replica: ContainerReplica) -> None:
        """Until `GET /healthz` answers on the socket; Unavailable (with its last log lines)
        when the container exits first or the start timeout passes."""
        deadline = time.monotonic() + self.start_timeout
        path = str(replica.socket_dir / REPLICA_SOCKET)
        while True:
            if os.path.exists(path) and replicas.healthy(path):
                return
            if not self.alive(replica) or time.monotonic() > deadline:
                tail = self.engine.logs(replica.name, 5).strip()
                why = "exited" if not self.alive(replica) else "did not answer in time"
                raise Unavailable(
                    f"replica of {spec.key} {why}" + (f": {tail[-500:]}" if tail else "")
                )
            time.sleep(0.05)

    def _remove(self, name: str, socket_dir: Path) -> None:
        try:
            self.engine.remove(name)
        except RuntimeFailure:
            log.warning("removing replica container %s failed", name, exc_info=True)
        shutil.rmtree(socket_dir, ignore_errors=True)

    def remove_left_over(self) -> None:
        """Remove every replica container of this launcher's folder (module docstring)."""
        try:
            names = [status.name for status in self.engine.list({LABEL_DIR: self.dir_label})]
        except RuntimeFailure:
            log.warning("cannot list app replica containers", exc_info=True)
            return
        for name in names:
            self._remove(name, self._sockets / name)

    def _work(self) -> Path:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        return self.work_dir


def container_launcher(
    conf: Path | None,
    work_dir: Path,
    base_image: str,
    wheelhouse: Path | None,
    start_timeout: float,
) -> ContainerLauncher:
    """A launcher on this machine's engine (`runtime.detect`: Podman with `conf`, else Docker);
    with neither, on Podman anyway: replicas then fail with the reason, the platform runs."""
    files = work_dir / "engine"  # the engine's own files (env files), the platform user's
    try:
        engine = detect(conf, entrypoint_dir=files)
    except RuntimeFailure:
        engine = PodmanRuntime(conf=conf, entrypoint_dir=files)
    return ContainerLauncher(engine, work_dir, base_image, wheelhouse, start_timeout=start_timeout)
