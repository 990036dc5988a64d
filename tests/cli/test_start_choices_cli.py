"""`cardhour start --choices | --wait | --no-gpu | --move` against a real server (simulated
fleet: no stop keeps a disk there, so a start has no choice to make), and the choices table."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from cardhour.api.schemas import StartChoicesRead
from cardhour.cli.render import choices_table
from tests.cli.test_cli import Server, cli, ok, one_line_error, signed_up


def test_start_choices_and_modes(server: Server, tmp_path: Path) -> None:
    config = signed_up(server, tmp_path)
    ok(config, "launch", "--gpu", "H100:1", "--name", "a", "--no-wait")
    ok(config, "stop", "a")
    found = json.loads(ok(config, "start", "a", "--choices", "--json"))
    assert found["disk_host"] is None and found["gpus_free"] is True
    assert found["choices"][2]["available"] is False
    one_line_error(cli(config, "start", "a", "--no-gpu"), "invalid_transition")
    one_line_error(cli(config, "start", "a", "--move"), "invalid_transition")
    both = cli(config, "start", "a", "--wait", "--move")
    assert both.returncode == 2 and "at most one of" in both.stderr
    started = json.loads(ok(config, "start", "a", "--wait", "--json"))
    assert started["status"] in ("pending", "provisioning", "running")


def test_the_choices_table_says_each_choice() -> None:
    found = StartChoicesRead.model_validate(
        {
            "disk_host": "h1",
            "disk_gb": 3,
            "gpus_free": False,
            "choices": [
                {"mode": "wait", "detail": "wait in the queue for the GPUs of h1"},
                {"mode": "no_gpu", "detail": "run", "price_per_hour": "0.10", "currency": "CNY"},
                {
                    "mode": "move",
                    "detail": "copy",
                    "available": True,
                    "to": "h2",
                    "copy_seconds": 77,
                },
            ],
        }
    )
    console = Console(width=200, record=True)
    console.print(choices_table(found))
    text = console.export_text()
    assert "its disk is kept on h1; the GPUs there are taken" in text
    assert "--no-gpu" in text and "0.10 CNY/hour" in text
    assert "--move" in text and "copy ~77 s, not billed" in text
