"""`cardhour ssh-keys add|list|remove` against a real server."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_cli import Server, cli, ok, one_line_error, signed_up

pytestmark = pytest.mark.skipif(
    shutil.which("ssh-keygen") is None, reason="ssh-keygen (openssh-client) is installed by make"
)


def test_add_list_remove(server: Server, tmp_path: Path) -> None:
    config = signed_up(server, tmp_path)
    key = tmp_path / "id_ed25519"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ada@laptop", "-f", str(key)],
        check=True,
    )
    fingerprint = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(key)], check=True, capture_output=True, text=True
    ).stdout.split()[1]

    line = ok(config, "ssh-keys", "add", str(key.with_suffix(".pub")))
    assert line == f"added ada@laptop: ssh-ed25519 256 bits, {fingerprint}\n"
    listed = json.loads(ok(config, "ssh-keys", "list", "--json"))
    assert [(k["name"], k["fingerprint"]) for k in listed] == [("ada@laptop", fingerprint)]
    table = ok(config, "ssh-keys", "list")
    assert "ada@laptop" in table and fingerprint in table

    # the private half: refused in one line, not echoed, nothing stored
    err = one_line_error(cli(config, "ssh-keys", "add", str(key)), "private_key_refused")
    assert key.read_text().splitlines()[1][:20] not in err
    one_line_error(cli(config, "ssh-keys", "add", str(tmp_path / "missing.pub")), "invalid_input")
    one_line_error(cli(config, "ssh-keys", "add", str(key.with_suffix(".pub"))), "conflict")
    one_line_error(cli(config, "ssh-keys", "remove", "nope"), "not_found")

    removed = json.loads(ok(config, "ssh-keys", "remove", fingerprint, "--json"))
    assert removed["name"] == "ada@laptop"
    assert ok(config, "ssh-keys", "list").startswith("no SSH keys")
