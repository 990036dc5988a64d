"""One `cardhour up` per test module that asks for `server` (started by `start_server`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cli.test_cli import Server, start_server, stop_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("up"))
    try:
        yield srv
    finally:
        stop_server(srv.proc)
