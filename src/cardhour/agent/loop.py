"""The agent's loop: join once, then report and converge until stopped.

Each report is the heartbeat; the inventory is read again every `inventory_seconds` (on a
thread of its own: `InventoryReader`) and sent when it changed. While containers are changing
the agent reports again every `poll_seconds`; once settled it long-polls (`wait` = the
heartbeat): the control plane answers early when new work arrives, so a placement reaches the
host within a fraction of a second.

The host credential is kept in `<state_dir>/credential.json` (mode 0600): a restarted agent
reuses it (no new token needed) and adopts the containers it finds (`converge`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cardhour.agent import inventory
from cardhour.agent.apps import AppReplicas
from cardhour.agent.config import AgentSettings
from cardhour.agent.converge import Converger
from cardhour.agent.disk_copies import DiskCopies
from cardhour.agent.volumes import Volumes
from cardhour.api.schemas.hosts import AgentReport, ContainerReportIn
from cardhour.client.connection import ApiError
from cardhour.client.hosts import AgentChannel
from cardhour.core.errors import InvalidInput
from cardhour.runtime import cdi
from cardhour.runtime.base import LABEL_HOST, ContainerRuntime
from cardhour.runtime.detect import detect
from cardhour.runtime.docker import DockerRuntime
from cardhour.runtime.podman import PodmanRuntime

log = logging.getLogger("cardhour.agent")
BACKOFF_SECONDS = (1, 2, 5, 10)


@dataclass(frozen=True)
class Credential:
    server: str
    host: str
    credential: str


class Revoked(Exception):
    """The control plane no longer knows this host (removed, or the credential revoked)."""


class Agent:
    def __init__(self, settings: AgentSettings, runtime: ContainerRuntime | None = None) -> None:
        self.settings = settings
        self.runtime = runtime
        self.path = settings.state_dir / "credential.json"

    # -- joining ----------------------------------------------------------------------------

    def credential(self, stop: threading.Event | None = None) -> Credential:
        """The saved credential, or a new one traded for the join token (then saved). A saved
        credential for another server is not reused. InvalidInput when there is neither; Revoked
        when the control plane refuses the token and there is no saved credential to fall back
        on (the join command run again, e.g. by a service unit, keeps working). While the
        control plane cannot be reached (or answers 5xx) the join is retried with a backoff
        until `stop` is set."""
        saved = None
        if self.path.exists():
            saved = Credential(**json.loads(self.path.read_text()))
            if saved.server != self.settings.server:
                saved = None
            elif not self.settings.token:
                return saved
        if not self.settings.token:
            raise InvalidInput(
                "this host has not joined: run `cardhour admin hosts add NAME --dc DC` on the "
                "control plane and pass the token it prints (--token)"
            )
        stop = stop or threading.Event()
        failures = 0
        with AgentChannel(self.settings.server) as channel:
            while True:
                try:
                    joined = channel.join(self.settings.token)
                    break
                except ApiError as exc:
                    if 400 <= exc.status < 500 and saved is not None:
                        log.info("the token was refused (%s): using the saved credential", exc)
                        return saved
                    if 400 <= exc.status < 500:
                        raise Revoked(exc.message) from exc
                    pause = _backoff(failures)
                    failures += 1
                    log.warning("join failed (%s); again in %s s", exc.message, pause)
                    if stop.wait(pause):
                        raise
        saved = Credential(self.settings.server, joined.host, joined.credential)
        self.settings.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.touch(mode=0o600)
        tmp.chmod(0o600)
        tmp.write_text(json.dumps(vars(saved)))
        tmp.replace(self.path)
        log.info("joined %s as host %s", saved.server, saved.host)
        return saved

    # -- the engine and the GPUs ------------------------------------------------------------

    def _runtime(self) -> ContainerRuntime:
        if self.runtime is not None:
            return self.runtime
        s = self.settings
        entry = s.state_dir / "runtime"
        cdi_dirs = (s.cdi_dir,) if s.standin_gpus else ()
        if s.runtime == "podman":
            return PodmanRuntime(conf=s.containers_conf, cdi_dirs=cdi_dirs, entrypoint_dir=entry)
        if s.runtime == "docker":
            return DockerRuntime(entrypoint_dir=entry)
        return detect(s.containers_conf, cdi_dirs, entry)

    def _inventory(self, host: str) -> inventory.Inventory:
        s = self.settings
        if s.standin_gpus is None:
            return inventory.real(s.state_dir)
        kind = cdi.standin_kind(host)
        found = inventory.standin(s.standin_gpus, host, s.state_dir, kind)
        gpus = [
            cdi.StandinGpu(int(g["index"]), str(g["uuid"]), str(g["name"]))
            for g in found.report["gpus"]
        ]
        cdi.write_standin_spec(s.cdi_dir, kind, gpus)
        return found

    # -- the loop ---------------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None) -> None:
        """Report and converge until `stop` is set. Revoked when the control plane refuses the
        credential; other errors are logged and retried with a backoff."""
        stop = stop or threading.Event()
        me = self.credential(stop)
        runtime = self._runtime()
        found = self._inventory(me.host)
        s = self.settings
        converger = Converger(
            runtime, me.host, s.address, found.devices, s.weights_dir, s.standin_gpus is None
        )
        converger.volumes = Volumes(
            s.volumes_dir or s.state_dir / "volumes", s.state_dir / "volume-mounts"
        )
        converger.copies = DiskCopies(runtime)
        fetches = AgentChannel(me.server, me.credential)  # the converge thread's own
        converger.apps = AppReplicas(
            runtime, s.address, s.state_dir, lambda w: fetches.app_context(me.host, w)
        )
        worker = ConvergeWorker(converger, s.poll_seconds)
        worker.start(stop)
        reader = InventoryReader(lambda: self._inventory(me.host), found, s.inventory_seconds)
        reader.start(stop)
        sent_inventory: dict[str, Any] | None = None
        version: int | None = None
        heartbeat, failures = 10.0, 0
        with AgentChannel(me.server, me.credential) as channel, fetches:
            while not stop.is_set():
                found = reader.latest()
                converger.devices = found.devices
                reports, settled = worker.latest()
                body = AgentReport(
                    host=me.host,
                    inventory=found.report if sent_inventory != found.report else None,
                    address=s.address,
                    runtime=runtime.name,
                    standin=s.standin_gpus is not None,
                    containers=None
                    if reports is None
                    else [ContainerReportIn(**r) for r in reports],
                )
                try:
                    answer = channel.report(
                        body, wait=heartbeat if settled else 0, since=version if settled else None
                    )
                except ApiError as exc:
                    if exc.status in (401, 403):
                        stop.set()  # the worker starts nothing more
                        worker.join(120)
                        _remove_all(runtime, me.host)
                        raise Revoked(exc.message) from exc
                    pause = _backoff(failures)
                    failures += 1
                    log.warning("report failed (%s); again in %s s", exc.message, pause)
                    stop.wait(pause)
                    continue
                failures = 0
                sent_inventory = found.report
                heartbeat, version = float(answer.heartbeat_seconds), answer.version
                worker.offer(answer.containers)
                if not settled:  # report again soon, at once when the worker has news
                    worker.wait_for_news(s.poll_seconds)


class InventoryReader:
    """Reads the inventory again every `seconds` on its own thread: `nvidia-smi` can hang for
    its whole timeout when a GPU falls off the bus, and the heartbeat must not wait for it (a
    host silent for `lost_after_seconds` is lost). A read that fails leaves the last one
    standing (logged): the host's containers still run."""

    def __init__(
        self, read: Callable[[], inventory.Inventory], first: inventory.Inventory, seconds: float
    ) -> None:
        self.read, self.seconds = read, seconds
        self._latest = first

    def start(self, stop: threading.Event) -> None:
        thread = threading.Thread(target=self._run, args=(stop,), name="inventory", daemon=True)
        thread.start()

    def latest(self) -> inventory.Inventory:
        return self._latest  # replaced whole, never changed in place

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self.seconds):
            try:
                self._latest = self.read()
            except Exception as exc:  # noqa: BLE001 - the agent outlives a failed read
                log.warning("cannot read the inventory again (%s): reporting the last one", exc)


class ConvergeWorker:
    """Converges on its own thread, so that a slow engine call (an image pull takes minutes)
    never holds back the heartbeat. The loop offers each answer's desired list; the worker
    steps on the latest one (so at least once per heartbeat: an exited container is noticed),
    again every `poll_seconds` while unsettled, and keeps its last step's reports for the loop
    to send."""

    def __init__(self, converger: Converger, poll_seconds: float) -> None:
        self.converger = converger
        self.poll_seconds = poll_seconds
        self._lock = threading.Lock()
        self._desired: list[dict[str, Any]] | None = None
        self._reports: list[dict[str, Any]] | None = None  # None: no step yet
        self._settled = False
        self._work = threading.Event()
        self._news = threading.Event()

    def start(self, stop: threading.Event) -> None:
        self._thread = threading.Thread(target=self._run, args=(stop,), name="converge")
        self._thread.daemon = True
        self._thread.start()

    def join(self, timeout: float) -> None:
        """Wait for the step in progress (after `stop` was set)."""
        self._thread.join(timeout)

    def offer(self, desired: list[dict[str, Any]]) -> None:
        """Step on `desired` soon; a changed list is unsettled until a step says otherwise."""
        with self._lock:
            if desired != self._desired:
                self._desired, self._settled = desired, False
        self._work.set()

    def latest(self) -> tuple[list[dict[str, Any]] | None, bool]:
        """The last step's reports (None before the first step: the containers are not known
        yet), and whether nothing is changing (no step pending)."""
        with self._lock:
            return self._reports, self._settled

    def wait_for_news(self, timeout: float) -> None:
        self._news.wait(timeout)
        self._news.clear()

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            offered = self._work.wait(self.poll_seconds)
            self._work.clear()
            with self._lock:
                desired, settled = self._desired, self._settled
            if desired is None or (settled and not offered):
                continue
            try:
                reports, settled = self.converger.step(desired)
            except Exception:  # noqa: BLE001 - the agent outlives an engine hiccup
                log.exception("converging failed; again in %s s", self.poll_seconds)
                reports, settled = self.latest()[0] or [], False
            with self._lock:
                news = reports != self._reports or settled != self._settled
                self._reports = reports
                if desired is self._desired:  # not overtaken by a newer offer meanwhile
                    self._settled = settled
            if news:
                self._news.set()


def _remove_all(runtime: ContainerRuntime, host: str) -> None:
    """Remove every container of this host: it left the fleet (removed by the operator), so
    none of them is a renter's any more."""
    for container in runtime.list({LABEL_HOST: host}):
        log.warning("removing %s: this host left the fleet", container.name)
        runtime.remove(container.name)


def _backoff(failures: int) -> int:
    return BACKOFF_SECONDS[min(failures, len(BACKOFF_SECONDS) - 1)]


def forget(state_dir: Path) -> None:
    """Drop the saved credential (the next start needs a join token)."""
    (state_dir / "credential.json").unlink(missing_ok=True)
