"""SSH for real on the `sim` backend: each node of a 2-node cluster is a real sshd on a loopback
port; the owner's key is injected, `ssh -F <written config> NAME true` and `NAME-worker1` log in,
a key that was not injected is refused, and `down` stops the daemons."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from cardhour.api.app import create_app
from cardhour.api.schemas import InstanceRead
from cardhour.backends.sim import sshd
from cardhour.cli.compute import ssh as ssh_config
from cardhour.core.clock import ManualClock
from cardhour.platform import Platform
from cardhour.settings import Settings

pytestmark = pytest.mark.skipif(
    not sshd.available() or shutil.which("ssh") is None,
    reason="openssh-server and openssh-client are installed by make test",
)


@pytest.fixture
def platform(database_url: str, tmp_path: Path) -> Iterator[Platform]:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        sim={"provision_seconds": 30, "sshd": True},
    )
    p = Platform(settings, clock=ManualClock())
    yield p
    p.stop()
    for folder in sorted((tmp_path / "data" / "sshd").glob("*/*")):  # even after a failure
        sshd.stop(folder)


def keygen(folder: Path, name: str) -> Path:
    key = folder / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True
    )
    return key


def ssh(home: Path, key: Path, host: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "ssh",
            "-F",
            str(home / ".ssh" / "config"),
            "-i",
            str(key),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=10",
            host,
            "true",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_ssh_name_and_worker_log_in_with_the_injected_key_only(
    platform: Platform, tmp_path: Path
) -> None:
    home = Path(os.environ["HOME"])
    key, stranger = keygen(tmp_path, "mine"), keygen(tmp_path, "stranger")
    with TestClient(create_app(platform)) as client:
        r = client.post(
            "/api/v1/auth/signup", json={"email": "ssh@example.com", "password": "pw-12345678"}
        )
        headers = {"Authorization": f"Bearer {r.json()['api_key']}"}
        body = {"public_key": key.with_suffix(".pub").read_text()}
        assert client.post("/api/v1/ssh-keys", headers=headers, json=body).status_code == 201
        with platform.sessions() as s, s.begin():
            from cardhour.core.money import Money
            from cardhour.services.accounts import users as accounts
            from cardhour.services.billing import ledger

            user = accounts.sign_in(s, "ssh@example.com", "pw-12345678")
            ledger.top_up(s, user.id, Money.parse("100"), platform.clock.now(), "ssh-test")
        launch = {"gpu": "H100", "count": 8, "nodes": 2, "name": "llm"}
        assert client.post("/api/v1/instances", headers=headers, json=launch).status_code == 201
        platform.reconcile()
        assert isinstance(platform.clock, ManualClock)
        platform.clock.advance(30)
        platform.reconcile()
        inst = InstanceRead.model_validate(
            client.get("/api/v1/instances/llm", headers=headers).json()
        )
        assert inst.status == "running", inst.status_reason
        keys_stage = next(s for s in inst.stages if s.name == "keys_injected")
        assert keys_stage.outcome == "ok"  # read back from the sshd's own authorized_keys
        assert ssh_config.write(inst) is not None

        assert ssh(home, key, "llm").returncode == 0
        assert ssh(home, key, "llm-worker1").returncode == 0
        refused = ssh(home, stranger, "llm")
        assert refused.returncode == 255 and "Permission denied" in refused.stderr

        ports = list((inst.connection or {})["ports"].values())
        assert client.delete("/api/v1/instances/llm", headers=headers).status_code == 200
        platform.reconcile()
    for port in ports:  # the daemons are gone with the instance
        with socket.socket() as s, pytest.raises(OSError):
            s.settimeout(2)
            s.connect(("127.0.0.1", port))
