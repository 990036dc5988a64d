"""A worker that dies between the backend call and the apply leaves work the next one finishes."""

from __future__ import annotations

from cardhour.backends.sim import SimBackend
from cardhour.db.engine import transaction
from cardhour.reconcilers.provisioning import launch_spec
from cardhour.services import provisioning
from tests.conftest import Api


def test_crash_after_launch_is_finished_by_the_next_worker(api: Api) -> None:
    headers = api.signup()
    inst = api.client.post("/api/v1/instances", headers=headers, json={"gpu": "H100"}).json()
    api.platform.scheduler.step()
    backend = api.platform.backend
    assert isinstance(backend, SimBackend)
    with transaction(api.platform.sessions) as s:
        (claim,) = provisioning.claim(s, api.clock.now(), lease_seconds=60)
    assert claim.external_name is not None
    backend.launch(launch_spec(claim))
    # ... the worker dies here. While its lease lasts, nobody else touches the row:
    api.settle(30)
    row = api.client.get(f"/api/v1/instances/{inst['id']}", headers=headers).json()
    assert row["status"] == "provisioning"
    api.settle(31)  # lease expired: the next pass re-claims, re-launches (a no-op) and applies
    row = api.client.get(f"/api/v1/instances/{inst['id']}", headers=headers).json()
    assert row["status"] == "running"
    assert backend.machines() == [claim.external_name]
    assert [c for c in backend.calls if c[0] == "launch"] == [("launch", claim.external_name)] * 2
