"""Replicas as containers (`ContainerLauncher`, a `runtime.Launcher`): the default, because an
app is a developer's code and untrusted code runs only inside containers.

- **Image per app version**, built once (under the version's lock) on its first replica or when
  the apps reconciler `prepare`s it: FROM the operator's app base image (`make images` builds
  `localhost/cardhour/app-python`: Debian's Python 3 with numpy, espeak-ng and tesseract), the
  manifest's requirements that the base lacks installed by pip from the operator's wheelhouse
  only (`--no-index --no-deps`, with no network: exactly the named wheels), the package at
  `/app`, the runner (`runner.py`, standard library only) at `/opt/cardhour/runner.py`. Its tag
  `localhost/cardhour-app/<app id>:<version>` carries a build key (package, requirements, base
  image, runner): a stale image is rebuilt.
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
import re
import shutil
import stat
import tempfile
import threading
import time
import zipfile
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from cardhour.backends.apps import runner
from cardhour.backends.apps.process import missing as missing_from
from cardhour.backends.apps.process import requirement_name
from cardhour.backends.apps.runtime import connection
from cardhour.core.apps import REPLICA_CPU_MILLI
from cardhour.core.errors import Unavailable
from cardhour.core.replicas import AppSpec, Placed, placement_env
from cardhour.runtime.base import (
    ContainerRuntime,
    ContainerSpec,
    ImageUnavailable,
    Mount,
    RuntimeFailure,
)
from cardhour.runtime.detect import detect
from cardhour.runtime.podman import PodmanRuntime

log = logging.getLogger("cardhour.apps")

LABEL_DIR = "org.cardhour.apps-dir"  # which launcher folder a replica's socket is in
LABEL_VERSION = "org.cardhour.app-version"  # the version key it serves
LABEL_BUILD = "org.cardhour.build-key"  # on an app image: what it was built from
USER = "65534:65534"  # nobody: owns the socket folder, has no capability
INNER_SOCKET_DIR = "/run/cardhour"
SOCKET = "app.sock"

_DISTRIBUTIONS = (
    "import importlib.metadata as m, json; "
    "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
)


def normalise(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheels_in(folder: Path | None) -> dict[str, tuple[str, Path]]:
    """The wheels of `folder`: normalised name → (version, file); empty when there is none."""
    found: dict[str, tuple[str, Path]] = {}
    if folder is None or not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.whl")):
        parts = path.name.split("-")
        if len(parts) >= 5:
            found[normalise(parts[0])] = (parts[1], path)
    return found


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
        name = f"ch-app-{_slug(spec.key)}-{os.getpid()}-{next(self._counter)}"
        try:
            socket_dir = self._socket_dir(name)
        except OSError as exc:
            raise Unavailable(f"replica of {spec.key} cannot start: {exc}") from exc
        env = {"HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        env |= placement_env(placed)
        container = ContainerSpec(
            name=name,
            image=image,
            labels={LABEL_DIR: self.dir_label, LABEL_VERSION: spec.key},
            env=env,
            cpus=REPLICA_CPU_MILLI / 1000,
            memory_mb=spec.resources.memory_gb * 1024,
            mounts=(Mount(str(socket_dir), INNER_SOCKET_DIR, read_only=False),),
            read_only_root=True,
            network="none",
            user=USER,
            pids_limit=self.pids_limit,
            unprivileged=True,
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
        return replica, str(socket_dir / SOCKET)

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
        app_id, _, version = spec.key.rpartition(":")
        tag = f"localhost/cardhour-app/{_slug(app_id)}:v{_slug(version)}"
        if tag in self._built:
            return tag
        try:
            base_labels = self.engine.image_labels(self.base_image)
            if base_labels is None:
                raise Unavailable(
                    f"replica of {spec.key} cannot start: the app base image {self.base_image} "
                    "is not here (`make images` builds it)"
                )
            key = self._build_key(spec, base_labels)
            labels = self.engine.image_labels(tag)
            if labels is None or labels.get(LABEL_BUILD) != key:
                self._build(spec, tag, key)
        except (RuntimeFailure, OSError) as exc:
            raise Unavailable(f"replica of {spec.key} cannot start: {exc}") from exc
        self._built.add(tag)
        return tag

    def _build_key(self, spec: AppSpec, base_labels: dict[str, str]) -> str:
        digest = hashlib.sha256()
        for part in (
            spec.package.read_bytes(),
            json.dumps([spec.entrypoint, sorted(spec.requirements)]).encode(),
            json.dumps(sorted(base_labels.items())).encode(),
            Path(runner.__file__).read_bytes(),
        ):
            digest.update(hashlib.sha256(part).digest())
        return digest.hexdigest()[:16]

    def _build(self, spec: AppSpec, tag: str, key: str) -> None:
        started = time.monotonic()
        context = Path(tempfile.mkdtemp(prefix="build-", dir=self._work()))
        try:
            with zipfile.ZipFile(spec.package) as archive:
                archive.extractall(context / "app")
            shutil.copy(runner.__file__, context / "runner.py")
            lines = [f"FROM {self.base_image}"]
            if spec.requirements:
                (context / "wheels").mkdir()
                wheels = wheels_in(self.wheelhouse)
                for line in spec.requirements:
                    wheel = wheels.get(normalise(requirement_name(line) or ""))
                    if wheel is not None:
                        shutil.copy(wheel[1], context / "wheels")
                (context / "requirements.txt").write_text("\n".join(spec.requirements) + "\n")
                lines += [
                    "COPY wheels /tmp/wheels",
                    "COPY requirements.txt /tmp/requirements.txt",
                    "RUN python3 -m pip install --quiet --no-cache-dir --no-index --no-deps "
                    "--break-system-packages --find-links /tmp/wheels -r /tmp/requirements.txt "
                    "&& rm -rf /tmp/wheels /tmp/requirements.txt",
                ]
            socket = f"{INNER_SOCKET_DIR}/{SOCKET}"
            argv = ["python3", "/opt/cardhour/runner.py", "--dir", "/app",
                    "--entrypoint", spec.entrypoint, "--socket", socket]  # fmt: skip
            lines += [
                "COPY app /app",
                "COPY runner.py /opt/cardhour/runner.py",
                f"USER {USER}",
                "WORKDIR /app",
                f"CMD {json.dumps(argv)}",
            ]
            (context / "Containerfile").write_text("\n".join(lines) + "\n")
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
        path = str(replica.socket_dir / SOCKET)
        while True:
            if os.path.exists(path):
                conn = connection(path, timeout=5)
                try:
                    conn.request("GET", "/healthz")
                    if conn.getresponse().status == 200:
                        return
                except OSError:
                    pass
                finally:
                    conn.close()
            if not self.alive(replica) or time.monotonic() > deadline:
                tail = self.engine.logs(replica.name, 5).strip()
                why = "exited" if not self.alive(replica) else "did not answer in time"
                raise Unavailable(
                    f"replica of {spec.key} {why}" + (f": {tail[-500:]}" if tail else "")
                )
            time.sleep(0.05)

    def _socket_dir(self, name: str) -> Path:
        """A folder for the replica's socket that only the container's user may write in."""
        folder = self._sockets / name
        self._sockets.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(self._sockets)  # in /tmp: refuse a folder someone else made
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            raise Unavailable(f"{self._sockets} is not a folder of this user: remove it")
        self._sockets.chmod(0o700)
        folder.mkdir(mode=0o700, exist_ok=True)
        uid, gid = (int(part) for part in USER.split(":"))
        if os.geteuid() == 0:
            os.chown(folder, uid, gid)
        else:  # rootless: the container's 65534 is a subordinate id of this user
            folder.chmod(0o777)
        return folder

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


def runtime_folder() -> Path:
    """Where this user's sockets go: `$XDG_RUNTIME_DIR`, else /run when writable (root), else
    the temporary folder."""
    if os.environ.get("XDG_RUNTIME_DIR"):
        return Path(os.environ["XDG_RUNTIME_DIR"])
    return Path("/run") if os.access("/run", os.W_OK) else Path(tempfile.gettempdir())


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


def _slug(text: str) -> str:
    """`text` fit for a container name and an image tag (lowercase, `[a-z0-9-]`)."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-") or "x"
