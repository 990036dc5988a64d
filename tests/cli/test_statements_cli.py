"""`cardhour usage` and `cardhour invoice` through the SDK against the in-process app."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cardhour.cli.billing import statements as cli_statements
from cardhour.cli.main import app
from cardhour.client import CardhourClient
from tests.conftest import Api


@pytest.fixture
def cli(api: Api, monkeypatch: pytest.MonkeyPatch) -> tuple[Api, CliRunner]:
    headers = api.signup()
    key = headers["Authorization"].removeprefix("Bearer ")
    api.top_up(headers, "100")
    r = api.client.post("/api/v1/instances", headers=headers, json={"gpu": "H100", "name": "x"})
    assert r.status_code == 201
    api.settle()
    api.settle(30)
    api.settle(5400)  # 1.5 card-hours, still running

    def connect(*_args: object) -> CardhourClient:
        return CardhourClient("http://testserver", key, transport=api.client._transport)

    monkeypatch.setattr(cli_statements, "connect", connect)
    return api, CliRunner()


def test_usage_shows_this_month_so_far(cli: tuple[Api, CliRunner]) -> None:
    _, runner = cli
    result = runner.invoke(app, ["usage"])
    assert result.exit_code == 0, result.output
    assert "cardhour statement 2026-01" in result.output and "so far" in result.output
    assert "x (running)" in result.output and "1.5" in result.output
    assert "2.85" in result.output  # 1.5 h × 1.90
    data = json.loads(runner.invoke(app, ["usage", "--json"]).output)
    assert data["month"] == "2026-01" and data["total"] == "2.850000"
    assert [line["card_seconds"] for line in data["usage_lines"]] == [5400]
    assert "paid_from" not in data


def test_invoice_tables_json_and_csv(cli: tuple[Api, CliRunner], tmp_path: Path) -> None:
    _, runner = cli
    shown = runner.invoke(app, ["invoice", "2026-01"])
    assert shown.exit_code == 0, shown.output
    for text in ("opening balance", "closing balance", "top-ups", "paid from", "held"):
        assert text in shown.output
    body = json.loads(runner.invoke(app, ["invoice", "2026-01", "--json"]).output)
    assert body["usage_total"] == "2.850000"
    stdout = runner.invoke(app, ["invoice", "2026-01", "--csv", "-"])
    assert stdout.exit_code == 0
    rows = list(csv.DictReader(io.StringIO(stdout.output)))
    assert sum(Decimal(r["amount"]) for r in rows if r["type"] == "usage") == Decimal("2.85")
    target = tmp_path / "jan.csv"
    written = runner.invoke(app, ["invoice", "2026-01", "--csv", str(target)])
    assert written.exit_code == 0 and target.read_text() == stdout.output


def test_bad_months_exit_2_with_one_line(cli: tuple[Api, CliRunner]) -> None:
    _, runner = cli
    for args in (["invoice", "2026-13"], ["usage", "--month", "jan"], ["invoice", "2027-01"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert result.output.startswith("error: invalid_input: ")
        assert len(result.output.strip().splitlines()) == 1
    both = runner.invoke(app, ["invoice", "2026-01", "--json", "--csv", "-"])
    assert both.exit_code == 2
