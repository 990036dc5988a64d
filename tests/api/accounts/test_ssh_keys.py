"""SSH keys per account over the REST API (both databases): add with fingerprint, list, remove,
refusals with codes, tenant isolation, and every new instance getting the account's keys."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest

from cardhour.db.engine import transaction
from cardhour.db.models import InstanceRow, SshKeyRow
from tests.conftest import Api

pytestmark = pytest.mark.skipif(
    shutil.which("ssh-keygen") is None, reason="ssh-keygen (openssh-client) is installed by make"
)


def make_key(tmp: Path, name: str, comment: str) -> tuple[str, str, str]:
    """(public line, private text, fingerprint as ssh-keygen prints it)."""
    path = tmp / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
    )
    fingerprint = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(path)], check=True, capture_output=True, text=True
    ).stdout.split()[1]
    return path.with_suffix(".pub").read_text().strip(), path.read_text(), fingerprint


def test_add_list_remove_with_fingerprints(api: Api, tmp_path: Path) -> None:
    headers = api.signup()
    line, _, fingerprint = make_key(tmp_path, "k1", "ada@laptop")
    r = api.client.post("/api/v1/ssh-keys", headers=headers, json={"public_key": line + "\n"})
    assert r.status_code == 201, r.text
    added = r.json()
    assert (added["name"], added["type"], added["bits"]) == ("ada@laptop", "ssh-ed25519", 256)
    assert added["fingerprint"] == fingerprint and added["public_key"] == line

    second, _, fp2 = make_key(tmp_path, "k2", "")
    r = api.client.post(
        "/api/v1/ssh-keys", headers=headers, json={"public_key": second, "name": "ci-runner"}
    )
    assert r.status_code == 201, r.text
    listed = api.client.get("/api/v1/ssh-keys", headers=headers).json()
    assert [(k["name"], k["fingerprint"]) for k in listed] == [
        ("ada@laptop", fingerprint),
        ("ci-runner", fp2),
    ]

    # a fingerprint may hold '/': percent-encoded, as the client sends it
    r = api.client.delete(f"/api/v1/ssh-keys/{quote(fingerprint, safe='')}", headers=headers)
    assert r.status_code == 200 and r.json()["name"] == "ada@laptop"
    r = api.client.delete("/api/v1/ssh-keys/ci-runner", headers=headers)
    assert r.status_code == 200
    assert api.client.get("/api/v1/ssh-keys", headers=headers).json() == []


def test_refusals_have_codes_and_nothing_is_stored(api: Api, tmp_path: Path) -> None:
    headers = api.signup()
    line, private, _ = make_key(tmp_path, "k", "dup")
    cases = [
        ({"public_key": private}, 422, "private_key_refused"),
        ({"public_key": "ssh-ed25519 AAAA"}, 422, "invalid_input"),
        ({"public_key": "hello"}, 422, "invalid_input"),
        ({"public_key": line, "name": "bad name"}, 422, "invalid_input"),
        ({"public_key": line, "name": "x" * 65}, 422, "invalid_input"),
        ({}, 422, "invalid_input"),
    ]
    for body, status, code in cases:
        r = api.client.post("/api/v1/ssh-keys", headers=headers, json=body)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), (body, r.text)
        assert private not in r.text
    assert api.client.get("/api/v1/ssh-keys", headers=headers).json() == []
    with transaction(api.platform.sessions) as s:
        assert s.query(SshKeyRow).count() == 0

    assert api.client.post(
        "/api/v1/ssh-keys", headers=headers, json={"public_key": line}
    ).is_success
    again = api.client.post("/api/v1/ssh-keys", headers=headers, json={"public_key": line})
    assert (again.status_code, again.json()["error"]["code"]) == (409, "conflict")
    assert "already on your account as 'dup'" in again.json()["error"]["message"]
    other, _, _ = make_key(tmp_path, "k2", "dup")
    same_name = api.client.post("/api/v1/ssh-keys", headers=headers, json={"public_key": other})
    assert (same_name.status_code, same_name.json()["error"]["code"]) == (409, "conflict")
    r = api.client.post("/api/v1/ssh-keys", json={"public_key": line})
    assert r.status_code == 401


def test_tenants_see_and_remove_only_their_own_keys(api: Api, tmp_path: Path) -> None:
    alice, bob = api.signup(), api.signup()
    line, _, fingerprint = make_key(tmp_path, "k", "shared-laptop")
    key_id = api.client.post("/api/v1/ssh-keys", headers=alice, json={"public_key": line}).json()[
        "id"
    ]
    assert api.client.get("/api/v1/ssh-keys", headers=bob).json() == []
    for ident in (key_id, "shared-laptop", fingerprint, "SHA256:a/b/c"):
        r = api.client.delete(f"/api/v1/ssh-keys/{ident}", headers=bob)
        assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
    # the same key may sit on two accounts (a shared laptop): each has its own copy
    assert api.client.post("/api/v1/ssh-keys", headers=bob, json={"public_key": line}).is_success
    assert len(api.client.get("/api/v1/ssh-keys", headers=alice).json()) == 1


def test_new_instances_get_every_account_key_plus_the_launch_key(api: Api, tmp_path: Path) -> None:
    headers = api.signup()
    api.top_up(headers, "100")
    first, _, _ = make_key(tmp_path, "a", "one")
    second, _, _ = make_key(tmp_path, "b", "two")
    extra, _, _ = make_key(tmp_path, "c", "launch-only")
    for line in (first, second):
        assert api.client.post(
            "/api/v1/ssh-keys", headers=headers, json={"public_key": line}
        ).is_success
    r = api.client.post(
        "/api/v1/instances", headers=headers, json={"gpu": "RTX4090", "ssh_key": extra}
    )
    assert r.status_code == 201, r.text
    again = api.client.post(  # a launch key the account has already is not repeated
        "/api/v1/instances", headers=headers, json={"gpu": "RTX4090", "ssh_key": first}
    )
    assert again.status_code == 201, again.text
    with transaction(api.platform.sessions) as s:
        keys = {row.id: row.ssh_key for row in s.query(InstanceRow)}
    assert keys[r.json()["id"]] == f"{first}\n{second}\n{extra}\n"
    assert keys[again.json()["id"]] == f"{first}\n{second}\n"
