"""A worker that dies between the backend call and the apply leaves work the next one finishes."""

from __future__ import annotations

from cardhour.backends.sim import SimBackend
from cardhour.db.engine import transaction
from cardhour.reconcilers.provisioning import launch_spec
from cardhour.services.compute import provisioning
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


def test_a_worker_overtaken_after_launching_removes_what_it_created(api: Api) -> None:
    """Worker A claims and is slow; the user stops; worker B releases; then A's launch lands.
    A must not leave a machine behind on GPUs the database has already freed."""
    headers = api.signup()
    api.client.post("/api/v1/instances", headers=headers, json={"gpu": "H100", "name": "x"})
    api.platform.scheduler.step()
    with transaction(api.platform.sessions) as s:
        (claim_a,) = provisioning.claim(s, api.clock.now(), lease_seconds=60)
    assert api.client.post("/api/v1/instances/x/stop", headers=headers).status_code == 200
    api.platform.provisioner.step()  # worker B
    assert api.client.get("/api/v1/instances/x", headers=headers).json()["status"] == "stopped"
    assert api.platform.provisioner._work(claim_a) is False  # worker A's late launch
    assert api.platform.backend.machines() == []  # type: ignore[attr-defined]


def test_slow_provisioning_does_not_starve_a_stop(api: Api) -> None:
    backend = api.platform.backend
    assert isinstance(backend, SimBackend)
    backend.provision_seconds = 10_000
    headers = api.signup()
    api.top_up(headers, "100")
    for i in range(21):  # more than one claim batch (20)
        api.client.post("/api/v1/instances", headers=headers, json={"gpu": "A800", "name": f"s{i}"})
    api.settle()
    api.client.post("/api/v1/instances/s20/stop", headers=headers)
    api.settle()
    assert api.client.get("/api/v1/instances/s20", headers=headers).json()["status"] == "stopped"


def test_an_instance_never_ready_fails_after_the_timeout(api: Api) -> None:
    backend = api.platform.backend
    assert isinstance(backend, SimBackend)
    backend.provision_seconds = 10_000
    headers = api.signup()
    api.client.post("/api/v1/instances", headers=headers, json={"gpu": "H100", "name": "slow"})
    api.settle()
    api.settle(899)
    assert api.client.get("/api/v1/instances/slow", headers=headers).json()["status"] == (
        "provisioning"
    )
    api.settle(2)
    failed = api.client.get("/api/v1/instances/slow", headers=headers).json()
    assert (failed["status"], failed["nodes"]) == ("failed", [])
    assert "not ready within 900 s" in failed["status_reason"]
    assert backend.machines() == []
