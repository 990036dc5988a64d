"""`cardhour grants ...` and `cardhour admin role` through the SDK against the in-process app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cardhour.cli.grants import proposals as grants
from cardhour.cli.grants import reviews as grants_review
from cardhour.cli.main import app
from cardhour.client import CardhourClient
from tests.api.grants.proposal_helpers import PDF, Cast, make_cast
from tests.conftest import Api


class As:
    """Which account the patched `connect` uses for the next command."""

    def __init__(self, cast: Cast) -> None:
        self.cast = cast
        self.key = ""

    def __call__(self, who: dict[str, str]) -> As:
        self.key = who["Authorization"].removeprefix("Bearer ")
        return self


@pytest.fixture
def world(api: Api, monkeypatch: pytest.MonkeyPatch) -> tuple[Cast, As, CliRunner]:
    cast = make_cast(api)
    who = As(cast)

    def connect(*_args: object) -> CardhourClient:
        return CardhourClient("http://testserver", who.key, transport=api.client._transport)

    monkeypatch.setattr(grants, "connect", connect)
    monkeypatch.setattr(grants_review, "connect", connect)
    return cast, who, CliRunner()


def _run(runner: CliRunner, args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.output


def test_apply_review_decide_status(world: tuple[Cast, As, CliRunner], tmp_path: Path) -> None:
    cast, who, runner = world
    pdf = tmp_path / "p.pdf"
    pdf.write_bytes(PDF)
    abstract = tmp_path / "abstract.txt"
    abstract.write_text("We fold proteins.")
    who(cast.alice)
    applied = json.loads(
        _run(
            runner,
            ["grants", "apply", "--title", "Folding", "--abstract", f"@{abstract}"]
            + ["--institution", "Uni", "--hours", "80,000", "--gpu", "H100"]
            + ["--start", "2026-02-01", "--end", "2026-08-01", "--justification", "big"]
            + ["--member", cast.emails["bob"], "--pdf", str(pdf), "--submit", "--json"],
        )
    )
    pid = applied["id"]
    assert (applied["status"], applied["abstract"], applied["document"]["bytes"]) == (
        "submitted",
        "We fold proteins.",
        len(PDF),
    )
    who(cast.admin)
    assert "reviewers:" in _run(
        runner, ["grants", "assign", pid, cast.emails["r1"], cast.emails["r2"]]
    )
    for reviewer in (cast.r1, cast.r2):
        who(reviewer)
        assert pid in _run(runner, ["grants", "review"])
        scored = _run(
            runner,
            ["grants", "review", pid, "--technical-merit", "5", "--feasibility", "4"]
            + ["--compute-justification", "3", "--comment", "fine"],
        )
        assert "technical merit 5" in scored
    who(cast.admin)
    shown = _run(runner, ["grants", "decide", pid, "approve", "--hours", "50000", "--gpu", "H100"])
    assert "approved" in shown and "50,000 card-hours on H100" in shown
    who(cast.bob)
    status = _run(runner, ["grants", "status", pid])
    assert "approved" in status and "reviews:  2" in status and "usage:" in status
    data = json.loads(_run(runner, ["grants", "status", "--json"]))
    assert [(p["id"], p["approved_hours"]) for p in data] == [(pid, 50_000)]
    assert "was approved" in _run(runner, ["notifications"])


def test_bad_input_exits_2_with_one_line(world: tuple[Cast, As, CliRunner]) -> None:
    cast, who, runner = world
    who(cast.alice)
    common = ["--title", "T", "--abstract", "A", "--institution", "I", "--gpu", "H100"]
    common += ["--end", "2026-08-01", "--justification", "J"]
    cases = [
        (["grants", "apply", *common, "--hours", "lots", "--start", "2026-02-01"], "invalid_input"),
        (["grants", "apply", *common, "--hours", "1", "--start", "feb"], "invalid_input"),
        (
            ["grants", "apply", *common, "--hours", "100001", "--start", "2026-02-01"],
            "hours_out_of_range",
        ),
        (["grants", "status", "nope"], "not_found"),
        (["grants", "review"], "forbidden"),
        (["grants", "decide", "x", "approve"], "forbidden"),
        (["grants", "decide", "x", "perhaps"], "invalid_input"),
        (["admin", "role", cast.emails["bob"], "reviewer"], "forbidden"),
    ]
    for args, code in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert result.output.startswith(f"error: {code}: "), (args, result.output)
        assert len(result.output.strip().splitlines()) == 1


def test_admin_role_and_withdraw(world: tuple[Cast, As, CliRunner]) -> None:
    cast, who, runner = world
    who(cast.admin)
    assert "is now reviewer" in _run(runner, ["admin", "role", cast.emails["bob"], "reviewer"])
    p = cast.submitted()
    who(cast.alice)
    assert "withdrawn" in _run(runner, ["grants", "withdraw", p["id"], "--reason", "oops"])
    edited = json.loads(_run(runner, ["grants", "edit", p["id"], "--hours", "10", "--json"]))
    assert (edited["card_hours"], edited["status"]) == (10, "withdrawn")
    assert "submitted" in _run(runner, ["grants", "submit", p["id"]])
