"""The composition root: settings → database, catalog, backend, scheduler, reconcilers.

`cardhour up` builds one and runs the reconcilers on threads next to the web server; tests build
one with a `ManualClock` and call `reconcile()` to converge deterministically.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from cardhour.backends.apps.container import container_launcher
from cardhour.backends.apps.hosts import HostLauncher
from cardhour.backends.apps.process import ProcessLauncher
from cardhour.backends.apps.runtime import Launcher, LocalAppRuntime
from cardhour.backends.base import Backend
from cardhour.backends.hosts import HostsBackend
from cardhour.backends.sim import SimBackend
from cardhour.backends.slurm import ProbedSlurmBackend, SlurmBackend, SlurmProbes
from cardhour.core.clock import Clock, SystemClock
from cardhour.core.errors import InvalidInput
from cardhour.core.money import Money
from cardhour.db import sealing
from cardhour.db.engine import (
    make_engine,
    make_sessionmaker,
    make_statement_engine,
    transaction,
)
from cardhour.db.migrate import upgrade
from cardhour.db.models import Base
from cardhour.reconcilers.apps import AppsReconciler
from cardhour.reconcilers.base import Reconciler
from cardhour.reconcilers.gateway import Gateway
from cardhour.reconcilers.health import HealthReconciler
from cardhour.reconcilers.inventory import InventoryReconciler
from cardhour.reconcilers.metering import MeteringReconciler
from cardhour.reconcilers.provisioning import ProvisioningReconciler
from cardhour.reconcilers.scheduling import SchedulingReconciler
from cardhour.reconcilers.sla import SlaReconciler
from cardhour.reconcilers.storage import StorageReconciler
from cardhour.scheduler import Scheduler, warm
from cardhour.services.billing import customers, ledger, pricing
from cardhour.services.compute import scheduling
from cardhour.services.hosts.book import HostBook
from cardhour.services.hosts.heartbeats import Heartbeats
from cardhour.services.marketplace import demo as demo_apps
from cardhour.services.marketplace.replicas import ReplicaPlacer
from cardhour.settings import Settings, load_catalog

log = logging.getLogger("cardhour")


class Platform:
    def __init__(
        self,
        settings: Settings,
        clock: Clock | None = None,
        backend: Backend | None = None,
        policy: Scheduler | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.catalog = load_catalog(settings.fleet_file)
        self.trial_credit = Money.parse(settings.trial_credit, self.catalog.currency)
        try:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidInput(f"cannot use data dir {settings.data_dir}: {exc.strerror}") from exc
        url = settings.resolved_database_url()
        self.sealer = sealing.Sealer(
            sealing.key_for(settings.data_dir, settings.sealing.key),
            [
                sealing.decode_key(k, "CARDHOUR_SEALING__PREVIOUS_KEYS")
                for k in settings.sealing.previous_keys
            ],
        )
        try:
            self.engine = make_engine(url)
            sealing.attach(self.engine, self.sealer)
            upgrade(self.engine)
            sealing.reseal(self.engine, sealing.sealed_columns(Base.metadata))
        except (ArgumentError, OperationalError, NoSuchModuleError) as exc:
            raise InvalidInput(
                f"cannot use database {url!r}: {exc.__class__.__name__}: {str(exc).splitlines()[0]}"
            ) from exc
        self.sessions: sessionmaker[Session] = make_sessionmaker(self.engine)
        self.host_book = HostBook(
            self.sessions, self.clock, timedelta(seconds=settings.hosts.lost_after_seconds)
        )
        self.backend = backend or self._make_backend()
        self.inventory = InventoryReconciler(self.sessions, self.clock, self.backend)
        with transaction(self.sessions) as session:
            ledger.ensure_platform_accounts(session, self.catalog.currency)
            pricing.seed_from_catalog(session, self.catalog, self.clock.now())
        self.inventory.step()  # the nodes first: the scheduler's typical workload reads them
        window = settings.scheduler.workload_window
        if policy is None:
            with transaction(self.sessions) as session:
                policy = scheduling.make_scheduler(session, settings.scheduler.policy, window)
        self.policy: Scheduler = policy
        # compiled here, outside any transaction: a first compile inside the scheduling cycle's
        # or a launch's transaction would hold the database's write lock for it
        warm(self.policy.profile)
        lease = settings.reconcilers.lease_seconds
        self.scheduler = SchedulingReconciler(
            self.sessions, self.clock, self.catalog, self.policy, window
        )
        self.provisioner = ProvisioningReconciler(
            self.sessions,
            self.clock,
            self.backend,
            lease,
            settings.reconcilers.provision_timeout_seconds,
            self.catalog,
        )
        self.meter = MeteringReconciler(
            self.sessions,
            self.clock,
            settings.reconcilers.charge_interval_seconds,
            settings.billing.low_balance_warning_seconds,
            settings.billing.autostop_grace_seconds,
        )
        self.health = HealthReconciler(self.sessions, self.clock, self.backend, self.catalog)
        self.app_code_dir = settings.data_dir / "apps"
        self.app_runtime = LocalAppRuntime(
            self._make_launcher(),
            self.clock,
            settings.marketplace.start_timeout_seconds,
            ReplicaPlacer(self.sessions, self.catalog, lambda: self.policy, self.clock),
        )
        self.statements = make_statement_engine(url)
        sealing.attach(self.statements, self.sealer)
        self.gateway = Gateway(
            self.statements,
            self.clock,
            self.app_runtime,
            self.app_code_dir,
            self.catalog.currency,
            settings.marketplace.developer_share_bp,
        )
        self.heartbeats = Heartbeats(self.statements, self.sessions)
        self.scheduler.followers = [self.provisioner]  # a placement is provisioned at once
        self.reconcilers: list[Reconciler] = [
            self.inventory,
            self.scheduler,
            self.provisioner,
            self.meter,
            self.health,
            SlaReconciler(self.sessions, self.clock),
            StorageReconciler(
                self.sessions,
                self.clock,
                self.backend,
                settings.reconcilers.charge_interval_seconds,
                self.catalog.currency,
                timedelta(days=settings.billing.volume_retention_days),
            ),
            AppsReconciler(self.sessions, self.clock, self.app_runtime, self.app_code_dir),
        ]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _make_launcher(self) -> Launcher:
        """What runs the marketplace's replicas (`settings.marketplace.runtime`)."""
        market = self.settings.marketplace
        work = self.settings.data_dir / "app-replicas"
        runtime = market.runtime
        if runtime == "auto":
            runtime = "hosts" if self.settings.backend == "hosts" else "container"
        if runtime == "process":
            return ProcessLauncher(work, market.start_timeout_seconds)
        if runtime == "hosts":
            return HostLauncher(
                self.host_book,
                market.app_image,
                market.wheelhouse,
                start_timeout=market.start_timeout_seconds,
            )
        return container_launcher(
            market.containers_conf,
            work,
            market.app_image,
            market.wheelhouse,
            market.start_timeout_seconds,
        )

    def app_build_context(self, key: str) -> bytes | None:
        """The build context of app version `key` for a host's agent to build its image from
        (`backends.apps.hosts`); None when replicas do not run on the hosts or no replica of
        the version was started by this process."""
        launcher = self.app_runtime.launcher
        return launcher.context(key) if isinstance(launcher, HostLauncher) else None

    def _make_backend(self) -> Backend:
        if self.settings.backend == "slurm":
            slurm = self.settings.slurm
            if slurm.conf is None:
                raise InvalidInput("backend slurm needs slurm.conf: set CARDHOUR_SLURM__CONF")
            args = (slurm.conf, self.settings.data_dir / "slurm-jobs", slurm.data_centre)
            options: dict[str, Any] = dict(
                gpu_models=slurm.gres_types,
                partition=slurm.partition,
                ib_rails=slurm.ib_rails,
                ib_gbps_per_rail=slurm.ib_gbps_per_rail,
            )
            if not slurm.gate:
                return SlurmBackend(*args, **options)
            probes = SlurmProbes(slurm.topo_command, slurm.ibstat_command, slurm.all_reduce_command)
            return ProbedSlurmBackend(*args, **options, probes=probes)
        if self.settings.backend == "hosts":
            return HostsBackend(self.host_book, self.catalog)
        if self.settings.backend != "sim":
            raise InvalidInput(
                f"unknown backend {self.settings.backend!r}; available: sim, hosts, slurm"
            )
        sim = self.settings.sim
        return SimBackend(
            self.catalog,
            self.clock,
            sim.provision_seconds,
            sim.fail_rate,
            state_file=self.settings.data_dir / "sim-state.json",
            sshd_dir=self.settings.data_dir / "sshd" if sim.sshd else None,
        )

    def bootstrap_admin(self) -> tuple[str, str]:
        """Create the admin on first start. Returns (email, password).

        The password comes from CARDHOUR_ADMIN_PASSWORD or is generated and kept in
        `<data_dir>/admin-password` (mode 0600) so `cardhour up` can print it again.
        """
        email = self.settings.admin_email
        path: Path = self.settings.data_dir / "admin-password"
        password = os.environ.get("CARDHOUR_ADMIN_PASSWORD")
        if password is None and path.exists():
            password = path.read_text().strip()
        if password is None:
            password = secrets.token_urlsafe(12)
            path.write_text(password + "\n")
            path.chmod(0o600)
        with transaction(self.sessions) as session:
            customers.ensure_admin(session, email, password, self.clock.now(), self.trial())
        return email, password

    def install_demo_apps(self) -> list[demo_apps.DemoApp]:
        """List the demo apps (`services.marketplace.demo`; `cardhour up` calls it after
        `bootstrap_admin`); none when the setting is off or the folder is not here."""
        market = self.settings.marketplace
        folder = market.demo_apps_dir or Path(__file__).resolve().parents[2] / "examples" / "apps"
        if not market.demo_apps or not folder.is_dir():
            return []
        return demo_apps.install(
            self.sessions,
            folder,
            self.app_code_dir,
            self.settings.admin_email,
            self.trial(),
            self.clock.now(),
            self.app_runtime.missing,
        )

    def trial(self) -> customers.Trial:
        """The sign-up credit every new account gets once."""
        days = self.settings.billing.trial_credit_days
        return customers.Trial(self.trial_credit, timedelta(days=days) if days else None)

    def wake(self) -> None:
        """Nudge the reconcilers after new intent was committed."""
        for reconciler in self.reconcilers:
            reconciler.wake()

    def reconcile(self, rounds: int = 3) -> None:
        """Run every reconciler until nothing changes (tests and one-shot tools)."""
        for _ in range(rounds):
            busy = False
            for reconciler in self.reconcilers:
                busy |= reconciler.step()
            if not busy:
                return

    def start(self) -> None:
        interval = self.settings.reconcilers.interval_seconds
        for reconciler in self.reconcilers:
            thread = threading.Thread(
                target=reconciler.run,
                args=(self._stop, interval),
                name=reconciler.name,
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        self.wake()
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads.clear()
        self.gateway.close()
        self.heartbeats.close()
        self.app_runtime.stop_all()
        self.statements.dispose()
        self.engine.dispose()
