"""A renter's environment variables are sealed at rest: the instance row, the host's wanted
container and a stored idempotent response hold ciphertext only, while the renter's status and
the agent's desired list (which starts the container) carry the values. Rows written before
sealing are sealed at the next start; a key rotation reseals under the new key; a value whose
key is gone stops the start with the reason, not with a wrong value."""

from __future__ import annotations

import base64
import os

import pytest
from sqlalchemy import text

from cardhour.db.models import InstanceRow
from cardhour.db.sealing import KEY_FILE, PREFIX, SealingFailed
from cardhour.platform import Platform
from cardhour.settings import SealingSettings
from tests.api.hosts.conftest import Agent, HostsApi

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl t@x"
SECRET = "hf_5ecretT0kenThatMustNotLeak"
BODY = {"gpu": "H100", "count": 1, "ssh_key": KEY, "env": {"HF_TOKEN": SECRET}}

COLUMNS = (
    "SELECT env FROM instances",
    "SELECT spec FROM host_containers",
    "SELECT response_body FROM idempotency_keys",
)


def _raw(api: HostsApi) -> list[str]:
    """Every stored value of the sealed columns, as the database holds it."""
    with api.platform.engine.connect() as conn:
        return [str(v) for q in COLUMNS for (v,) in conn.execute(text(q)) if v is not None]


def _launch(api: HostsApi) -> tuple[dict[str, str], str, Agent]:
    agent = api.enrol("box")
    api.settle()
    user = api.signup()
    headers = {**user, "Idempotency-Key": "launch-1"}
    r = api.client.post("/api/v1/instances", headers=headers, json=BODY)
    assert r.status_code == 201, r.text
    api.settle()
    return user, str(r.json()["id"]), agent


def _env_of(platform: Platform, ident: str) -> str | None:
    with platform.sessions() as session:
        return session.get_one(InstanceRow, ident).env


def test_renters_variables_are_ciphertext_at_rest_and_plain_where_used(
    hosts_api: HostsApi,
) -> None:
    api = hosts_api
    user, ident, agent = _launch(api)
    stored = _raw(api)
    assert len(stored) == 3, stored  # the instance, its container, the launch's response
    assert all(v.startswith(PREFIX) and SECRET not in v for v in stored), stored
    shown = api.client.get(f"/api/v1/instances/{ident}", headers=user).json()
    assert shown["env"] == {"HF_TOKEN": SECRET}
    (wanted,) = agent.report()["containers"]  # the agent starts the container with them
    assert wanted["env"] == {"HF_TOKEN": SECRET}
    other = api.enrol("box2")  # another host's agent is told nothing of it
    assert SECRET not in str(other.report())
    replay = api.client.post(
        "/api/v1/instances", headers={**user, "Idempotency-Key": "launch-1"}, json=BODY
    )
    assert replay.status_code == 201 and replay.json()["env"] == {"HF_TOKEN": SECRET}


def test_rows_from_before_sealing_are_sealed_at_the_next_start(hosts_api: HostsApi) -> None:
    api = hosts_api
    user, ident, _ = _launch(api)
    plain = '{"HF_TOKEN": "' + SECRET + '"}'
    with api.platform.engine.begin() as conn:  # as a release before sealing wrote it
        conn.execute(text("UPDATE instances SET env = :v WHERE id = :i"), {"v": plain, "i": ident})
    shown = api.client.get(f"/api/v1/instances/{ident}", headers=user).json()
    assert shown["env"] == {"HF_TOKEN": SECRET}  # read as it is meanwhile
    again = Platform(api.platform.settings, clock=api.clock)
    try:
        assert all(v.startswith(PREFIX) and SECRET not in v for v in _raw(api))
        assert _env_of(again, ident) == plain
    finally:
        again.engine.dispose()


def test_a_rotated_key_reseals_and_a_lost_key_stops_the_start(hosts_api: HostsApi) -> None:
    api = hosts_api
    _, ident, _ = _launch(api)
    settings = api.platform.settings
    old = (settings.data_dir / KEY_FILE).read_text().strip()
    new = base64.b64encode(os.urandom(32)).decode()
    lost = settings.model_copy(update={"sealing": SealingSettings(key=new)})
    with pytest.raises(SealingFailed, match="sealed under key"):
        Platform(lost, clock=api.clock)
    rotated = settings.model_copy(update={"sealing": SealingSettings(key=new, previous_keys=[old])})
    again = Platform(rotated, clock=api.clock)
    try:
        stored = _raw(api)
        assert all(v.startswith(f"{PREFIX}{again.sealer.key_id}:") for v in stored), stored
        assert _env_of(again, ident) == '{"HF_TOKEN": "' + SECRET + '"}'
    finally:
        again.engine.dispose()
