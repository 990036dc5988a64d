"""The workload on both databases: the launch checks and stores it, the provisioning claim
carries it, and `launch_spec` hands it to the backend with the instance's name."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cardhour.core.clock import ManualClock
from cardhour.core.errors import InvalidInput
from cardhour.core.money import Money
from cardhour.db.engine import transaction
from cardhour.db.models import InstanceRow, UserRow
from cardhour.platform import Platform
from cardhour.reconcilers.provisioning import launch_spec
from cardhour.services.billing import customers, ledger
from cardhour.services.compute import instances, provisioning, scheduling
from cardhour.services.compute.instances import LaunchRequest

ENV = {"Z_LAST": "1", "A_FIRST": "two words", "EMPTY": ""}


@pytest.fixture
def user_id(platform: Platform, clock: ManualClock) -> str:
    with transaction(platform.sessions) as s:
        user = customers.sign_up(
            s, "renter@example.com", "password123", clock.now(), customers.Trial(Money.zero())
        )
        ledger.top_up(s, user.id, Money.parse("100"), clock.now(), "pay-1")
        return user.id


def _launch(platform: Platform, clock: ManualClock, uid: str, req: LaunchRequest) -> str:
    with transaction(platform.sessions) as s:
        user = s.get(UserRow, uid)
        assert user is not None
        return instances.create(s, platform.catalog, user, req, clock.now()).id


def test_the_claim_and_the_launch_spec_carry_the_workload(
    platform: Platform, clock: ManualClock, user_id: str
) -> None:
    platform.catalog = replace(platform.catalog, registries=("docker.io",))
    req = LaunchRequest(
        gpu="RTX4090",
        count=1,
        name="jupyter",
        image="jupyter/base-notebook:latest",
        command="start-notebook.sh --port 8888",
        env=ENV,
        ports=[8888, 6006],
    )
    instance_id = _launch(platform, clock, user_id, req)
    with transaction(platform.sessions) as s:
        row = s.get(InstanceRow, instance_id)
        assert row is not None
        assert (row.image, row.command) == (
            "docker.io/jupyter/base-notebook:latest",
            "start-notebook.sh --port 8888",
        )
        assert (row.env, row.ports) == (
            '{"Z_LAST": "1", "A_FIRST": "two words", "EMPTY": ""}',
            "[8888, 6006]",
        )
        scheduling.run_cycle(s, platform.catalog, platform.policy, clock.now(), 1000)
    with transaction(platform.sessions) as s:
        [claim] = provisioning.claim(s, clock.now(), 60)
    assert (claim.name, claim.command) == ("jupyter", "start-notebook.sh --port 8888")
    assert claim.env == tuple(ENV.items()) and claim.ports == (8888, 6006)
    spec = launch_spec(claim, platform.catalog)
    assert spec.image == "docker.io/jupyter/base-notebook:latest"
    assert (spec.command, spec.env, spec.ports) == (claim.command, claim.env, claim.ports)
    assert spec.instance_name == "jupyter"
    assert spec.external_name == claim.external_name and spec.gpu_count == 1


def test_a_launch_without_a_workload_stores_nulls(
    platform: Platform, clock: ManualClock, user_id: str
) -> None:
    instance_id = _launch(platform, clock, user_id, LaunchRequest(gpu="RTX4090", count=1))
    with transaction(platform.sessions) as s:
        row = s.get(InstanceRow, instance_id)
        assert row is not None
        assert (row.image, row.command, row.env, row.ports) == (
            "pytorch-2.3-cuda12.3",
            None,
            None,
            None,
        )
        scheduling.run_cycle(s, platform.catalog, platform.policy, clock.now(), 1000)
    with transaction(platform.sessions) as s:
        [claim] = provisioning.claim(s, clock.now(), 60)
    spec = launch_spec(claim)
    assert (spec.image, spec.command, spec.env, spec.ports) == (
        "pytorch-2.3-cuda12.3",
        None,
        (),
        (),
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"image": "ubuntu"}, "only catalog images run"),
        ({"env": {"CARDHOUR_X": "1"}}, "env: CARDHOUR_X is reserved"),
        ({"ports": [22]}, "ports: 22"),
        ({"command": "a\0b"}, "command: contains a NUL"),
    ],
)
def test_the_service_checks_what_other_entry_points_send(
    platform: Platform, clock: ManualClock, user_id: str, fields: dict, message: str
) -> None:
    """The console (and any caller but the API, whose body checks first) gets the same rules."""
    with pytest.raises(InvalidInput, match=message):
        _launch(platform, clock, user_id, LaunchRequest(gpu="RTX4090", count=1, **fields))
    with transaction(platform.sessions) as s:
        assert s.query(InstanceRow).count() == 0
