"""`cardhour apps ...` and `cardhour admin app ...` against a real `cardhour up` (which lists
the demo apps): a developer publishes a folder and asks for review, the operator approves it,
another account calls it with a call id (charged once) and with a file as an input field, the
developer sees the calls; bad input is one line and exit 2."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

from tests.cli.test_cli import Server, admin_config, cli, ok, one_line_error

MANIFEST = """
name: Shout
slug: shout-{suffix}
category: other
description: Says it louder.
price_per_call: "0.03"
entrypoint: main:handle
input_schema: {{type: object, properties: {{text: {{type: string}}}}}}
output_schema: {{type: object}}
scaling: {{min_replicas: 0, max_replicas: 1, target_concurrency: 4, idle_seconds: 60}}
"""


def _user(server: Server, tmp_path: Path, who: str) -> tuple[Path, str]:
    config = tmp_path / who / "config.json"
    email = f"{who}-{uuid.uuid4().hex[:6]}@example.com"
    ok(config, "signup", "--url", server.url, "--email", email, "--password", "password123")
    return config, email


def test_publish_review_call_and_earnings(server: Server, tmp_path: Path) -> None:
    listed = json.loads(ok(tmp_path / "anon.json", "apps", "list", "--url", server.url, "--json"))
    assert {"rag-search", "image-restore", "tts"} <= {a["slug"] for a in listed}
    table = ok(tmp_path / "anon.json", "apps", "list", "--category", "rag", "--url", server.url)
    assert "rag-search" in table and "tts" not in table

    dev, _ = _user(server, tmp_path, "dev")
    caller, caller_email = _user(server, tmp_path, "caller")
    admin = admin_config(server, tmp_path)
    suffix = uuid.uuid4().hex[:6]
    folder = tmp_path / "shout"
    (folder / "__pycache__").mkdir(parents=True)
    (folder / "cardhour-app.yaml").write_text(MANIFEST.format(suffix=suffix))
    (folder / "main.py").write_text(
        "def handle(r):\n    return {'text': r['text'].upper() + '!'}\n"
    )
    (folder / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"not code")
    slug = f"shout-{suffix}"

    assert ok(dev, "apps", "publish", str(folder), "--submit") == (
        f"published {slug} version 1: in_review\n"
    )
    assert "forbidden" in one_line_error(cli(dev, "admin", "app", "approve", slug), "forbidden")
    assert ok(admin, "admin", "app", "approve", slug) == f"{slug} version 1: listed\n"
    ok(admin, "admin", "topup", caller_email, "1")

    r = cli(caller, "apps", "call", slug, '{"text": "hi"}', "--call-id", "c-1")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"text": "HI!"}
    assert r.stderr.startswith("charged 0.03 CNY, ")
    one_line_error(
        cli(caller, "apps", "call", slug, '{"text": "hi"}', "--call-id", "c-1"), "conflict"
    )
    one_line_error(cli(caller, "apps", "call", slug, "{not json"), "invalid_input")
    one_line_error(cli(caller, "apps", "call", slug, "@/nonexistent/input.json"), "invalid_input")
    one_line_error(cli(admin, "admin", "app", "frobnicate", slug), "invalid_input")
    fleet = json.loads(ok(admin, "admin", "nodes", "--json"))  # the replica's share is shown
    held = [r for n in fleet for r in n["app_replicas"] if r["app"] == slug]
    assert [(r["gpus"], r["cpu_milli"]) for r in held] == [([], 1000)]  # CPU only
    assert "APP REPLICAS" in ok(admin, "admin", "nodes")
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"\x89PNG any bytes")
    r = cli(caller, "apps", "call", slug, "--file", f"text={blob}")  # the input is {} + the file
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {
        "text": base64.b64encode(blob.read_bytes()).decode().upper() + "!"
    }
    one_line_error(cli(caller, "apps", "call", slug, "--file", str(blob)), "invalid_input")
    one_line_error(
        cli(caller, "apps", "call", slug, "--file", "text=/nonexistent"), "invalid_input"
    )

    earned = json.loads(ok(dev, "apps", "earnings", "--json"))
    assert (earned["calls"], earned["pending"], earned["available"]) == (2, "0.042000", "0.000000")
    mine = ok(dev, "apps", "mine")
    assert slug in mine and "listed" in mine
    one_line_error(cli(dev, "apps", "payout"), "conflict")  # nothing is available for 7 days
    assert ok(dev, "apps", "payouts") == "no payouts yet\n"
