"""`cardhour volumes create|list|show|delete` and `launch --volume` against a real server
(simulated fleet)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli import Server, cli, ok, one_line_error, signed_up


def test_create_list_launch_with_it_and_delete(server: Server, tmp_path: Path) -> None:
    config = signed_up(server, tmp_path)
    said = ok(config, "volumes", "create", "data", "--size", "100G", "--dc", "wh1")
    assert said.startswith("created volume data: 100 GiB in wh1, 0.030000 CNY per hour")
    listed = json.loads(ok(config, "volumes", "list", "--json"))
    assert [(v["name"], v["size_gb"], v["state"]) for v in listed] == [("data", 100, "available")]
    assert "data" in ok(config, "volumes", "list") and "100 GiB" in ok(config, "volumes", "list")
    assert "storage: its host's disk" in ok(config, "volumes", "show", "data")

    for args, code in (
        (("create", "big", "--size", "0G", "--dc", "wh1"), "invalid_input"),
        (("create", "big", "--size", "-1", "--dc", "wh1"), "invalid_input"),
        (("create", "big", "--size", "ten", "--dc", "wh1"), "invalid_input"),
        (("create", "big", "--size", "20T", "--dc", "wh1"), "invalid_input"),
        (("create", "big", "--size", "1G", "--dc", "mars"), "invalid_input"),
        (("create", "data", "--size", "1G", "--dc", "wh1"), "conflict"),
        (("show", "nope"), "not_found"),
        (("delete", "nope"), "not_found"),
    ):
        one_line_error(cli(config, "volumes", *args), code)

    launched = json.loads(
        ok(
            config,
            "launch",
            "--gpu",
            "H100:1",
            "--name",
            "a",
            "--volume",
            "data:/data",
            "--no-wait",
            "--json",
        )
    )
    assert launched["volumes"] == [{"volume": "data", "path": "/data"}]
    assert "data:/data" in ok(config, "status", "a")
    one_line_error(
        cli(config, "launch", "--gpu", "H100:1", "--volume", "data:/etc", "--no-wait"),
        "invalid_input",
    )
    one_line_error(cli(config, "volumes", "delete", "data"), "conflict")
    ok(config, "down", "a")
    for _ in range(100):  # the server's reconcilers release it
        if json.loads(ok(config, "volumes", "show", "data", "--json"))["state"] == "available":
            break
    deleted = ok(config, "volumes", "delete", "data")
    assert deleted.startswith("volume data delet")
    assert ok(config, "volumes", "list").startswith("no volumes")
