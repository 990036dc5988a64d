"""`cardhour admin hosts add|list|remove` and `cardhour agent`'s one-line errors, against a real
`cardhour up --backend hosts` (no agent runs containers here: tests/agent does)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli import (
    CARDHOUR,
    Server,
    admin_config,
    clean_env,
    cli,
    ok,
    one_line_error,
    signed_up,
    start_server,
    stop_server,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("up-hosts"), CARDHOUR_BACKEND="hosts")
    try:
        yield srv
    finally:
        stop_server(srv.proc)


def agent(server: Server, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(CARDHOUR), "agent", "--server", server.url, "--state-dir", str(state), *args]
    return subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=60)


def test_add_list_remove_and_the_agent_s_errors(server: Server, tmp_path: Path) -> None:
    admin = admin_config(server, tmp_path)
    added = json.loads(ok(admin, "admin", "hosts", "add", "gpu01", "--dc", "bj1", "--json"))
    assert added["token"].startswith("chj_")
    assert f"--server {server.url} --token {added['token']}" in added["command"]
    said = ok(admin, "admin", "hosts", "add", "gpu02", "--dc", "bj1")
    assert "the token works once" in said and "cardhour agent --server" in said

    listed = json.loads(ok(admin, "admin", "hosts", "list", "--json"))
    assert {h["name"]: h["state"] for h in listed} == {"gpu01": "waiting", "gpu02": "waiting"}
    assert "gpu01" in ok(admin, "admin", "hosts", "list")

    one_line_error(cli(admin, "admin", "hosts", "add", "gpu01", "--dc", "bj1"), "conflict")
    one_line_error(cli(admin, "admin", "hosts", "add", "Bad Name", "--dc", "bj1"), "invalid_input")
    one_line_error(cli(admin, "admin", "hosts", "add", "gpu03", "--dc", "nowhere"), "invalid_input")
    one_line_error(cli(admin, "admin", "hosts", "remove", "nope"), "not_found")
    renter = signed_up(server, tmp_path)
    one_line_error(cli(renter, "admin", "hosts", "list"), "forbidden")

    # an agent with a token that is not one, and one with none: one line, exit 2
    state = tmp_path / "agent"
    refused = agent(server, state, "--token", "chj_not-a-token", "--standin-gpus", "H100:1")
    assert refused.returncode == 2 and "refused this host" in refused.stderr, refused.stderr
    unjoined = agent(server, state)
    assert unjoined.returncode == 2, unjoined.stderr
    assert "cardhour admin hosts add" in unjoined.stderr.splitlines()[-1]

    removed = json.loads(ok(admin, "admin", "hosts", "remove", "gpu02", "--json"))
    assert removed["name"] == "gpu02"
    listed = json.loads(ok(admin, "admin", "hosts", "list", "--json"))
    assert [h["name"] for h in listed] == ["gpu01"]
