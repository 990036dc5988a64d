"""Drives the backend for instances in `provisioning` and `stopping`.

claim (transaction) → backend calls (no transaction) → apply if the lease token still matches.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from cardhour.backends.base import (
    Backend,
    BackendError,
    LaunchSpec,
    MachineState,
    Probing,
    ProvisioningFailed,
    WeightsMount,
)
from cardhour.core.catalog import Catalog
from cardhour.core.clock import Clock
from cardhour.core.hosts import disk_ref
from cardhour.db.engine import transaction
from cardhour.reconcilers.base import Reconciler
from cardhour.reconcilers.gate import Gate
from cardhour.services.compute import provisioning
from cardhour.services.compute.provisioning import Claim

log = logging.getLogger("cardhour.reconcilers.provisioning")


def launch_spec(claim: Claim, catalog: Catalog | None = None) -> LaunchSpec:
    """What the backend brings up, the renter's workload (image, command, env, ports) and name
    included; with `catalog`, the model weights to mount (copied in first where the data centre
    does not cache them)."""
    assert claim.external_name is not None
    weights = None
    if claim.weights is not None and claim.data_centre is not None and catalog is not None:
        plan = catalog.weights_plan(claim.weights, claim.data_centre)
        weights = WeightsMount(plan.weights.id, plan.weights.mount, plan.copy_seconds)
    return LaunchSpec(
        claim.external_name,
        claim.gpu_model,
        claim.gpu_count,
        claim.gpus_by_node,
        claim.image,
        claim.ssh_key,
        claim.bare_metal,
        weights,
        claim.attempt,
        command=claim.command,
        env=claim.env,
        ports=claim.ports,
        instance_name=claim.name,
        node_order=claim.node_order,
        volumes=claim.volumes,
        disk=_disk(claim),
        disk_from=disk_ref(claim.instance_id, claim.move_from) if claim.move_from else None,
    )


def _disk(claim: Claim) -> str | None:
    """Where a single node's container disk is kept on its host when it stops."""
    if len(claim.gpus_by_node) != 1:
        return None
    return disk_ref(claim.instance_id, next(iter(claim.gpus_by_node)))


class ProvisioningReconciler(Reconciler):
    name = "provisioning"

    def __init__(
        self,
        sessions: sessionmaker[Session],
        clock: Clock,
        backend: Backend,
        lease_seconds: int,
        timeout_seconds: int,
        catalog: Catalog | None = None,
    ) -> None:
        """With `catalog` and a backend that can probe (`Probing`), a workload that is up goes
        through the readiness gate (`reconcilers.gate`) before it runs; otherwise it runs at
        once."""
        super().__init__(sessions, clock)
        self.backend = backend
        self.catalog = catalog
        self.gated = catalog is not None and isinstance(backend, Probing)
        self.lease_seconds = lease_seconds
        self.timeout = timedelta(seconds=timeout_seconds)

    def step(self) -> bool:
        with transaction(self.sessions) as session:
            claims = provisioning.claim(session, self.clock.now(), self.lease_seconds)
        changed = False
        for claim in claims:
            try:
                changed |= self._work(claim)
            except ProvisioningFailed as exc:
                log.warning("provisioning %s failed: %s", claim.external_name, exc)
                if claim.status == "provisioning":
                    changed |= self._fail(claim, f"provisioning failed: {exc}")
            except BackendError as exc:  # the lease expires and a later pass retries
                log.warning("backend error on %s: %s", claim.external_name, exc)
            except Exception:  # noqa: BLE001 - one bad row must not stall the others
                log.exception("provisioning step failed on %s", claim.instance_id)
        return changed

    def _work(self, claim: Claim) -> bool:
        assert claim.external_name is not None
        name = claim.external_name
        if claim.status == "stopping":
            if claim.desired == "stopped":  # its disk kept where the backend can
                self.backend.stop(claim.external_name)
            else:
                self.backend.terminate(claim.external_name)
            polled = self.backend.poll(claim.external_name)
            if polled.state != MachineState.GONE:  # the backend's why, if it says one
                self._release(claim, polled.message)
                return False
            host, size = polled.connection.get("disk_host"), polled.connection.get("disk_gb")
            disk = (str(host), int(size or 1)) if host else None
            with transaction(self.sessions) as session:
                released = provisioning.apply_released(
                    session, claim, self.clock.now(), disk, self.catalog
                )
            if released and disk is not None:  # its disk is this one: any older copy goes
                self.backend.started(claim.external_name)
            return released
        self.backend.launch(launch_spec(claim, self.catalog))
        polled = self.backend.poll(claim.external_name)
        if polled.state in (MachineState.FAILED, MachineState.GONE):
            return self._fail(claim, polled.message or "the backend lost the machine")
        allowed = self.timeout
        if claim.move_gb and self.catalog is not None:  # the copy of its disk, thrice the estimate
            allowed += timedelta(seconds=3 * self.catalog.storage.copy_seconds(claim.move_gb))
        late = self.clock.now() - claim.status_since > allowed
        # no GPUs, nothing for the readiness gate to test
        if polled.state == MachineState.RUNNING and (not self.gated or claim.no_gpu):
            with transaction(self.sessions) as session:
                applied = provisioning.apply_running(
                    session, claim, polled.connection, self.clock.now()
                )
        elif late:  # booting, or the gate (a node that cannot be reached), took too long
            return self._fail(claim, f"not ready within {allowed.total_seconds():.0f} s")
        elif polled.state == MachineState.RUNNING:
            assert self.catalog is not None
            gate = Gate(
                self.sessions,
                self.clock,
                self.backend,
                self.catalog,
                polled.connection,
                self.lease_seconds,
            )
            applied = gate.run(claim, lambda: self.backend.terminate(name))
        else:
            applied = self._release(claim)
        if not applied:
            self._remove_if_orphaned(claim)
        return applied and polled.state == MachineState.RUNNING

    def _fail(self, claim: Claim, message: str) -> bool:
        """Clean up whatever the backend has (idempotent), then record the failure."""
        assert claim.external_name is not None
        self.backend.terminate(claim.external_name)
        with transaction(self.sessions) as session:
            return provisioning.apply_failed(session, claim, message, self.clock.now())

    def _release(self, claim: Claim, why: str | None = None) -> bool:
        with transaction(self.sessions) as session:
            return provisioning.release_lease(session, claim, self.clock.now(), why)

    def _remove_if_orphaned(self, claim: Claim) -> None:
        """Our lease was overtaken after we launched: terminate the workload unless the
        instance still runs under this very name (another worker took over)."""
        assert claim.external_name is not None
        with transaction(self.sessions) as session:
            wanted = provisioning.still_wanted(session, claim)
        if not wanted:
            log.info("terminating orphaned workload %s", claim.external_name)
            self.backend.terminate(claim.external_name)
