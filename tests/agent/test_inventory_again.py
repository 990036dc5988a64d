"""A running agent reads its inventory again (`inventory_seconds`) and reports a change with its
next heartbeat: a server that lost GPUs sells fewer without its agent being restarted."""

from __future__ import annotations

import threading
from pathlib import Path

from cardhour.agent.config import AgentSettings
from cardhour.agent.loop import Agent
from cardhour.runtime.cdi import DEFAULT_FOLDER, remove_standin_spec, standin_kind
from tests.agent.conftest import Hosts, wait_for
from tests.runtime.conftest import CONF


def test_a_changed_inventory_is_reported_without_a_restart(hosts: Hosts, tmp_path: Path) -> None:
    settings = AgentSettings(
        server=hosts.url,
        token=hosts.enrol("box"),
        state_dir=tmp_path / "agent-box",
        address="127.0.1.31",
        runtime="podman",
        containers_conf=CONF,
        standin_gpus="H100:8",
        inventory_seconds=0.3,
    )
    agent, stop = Agent(settings), threading.Event()
    thread = threading.Thread(target=agent.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: hosts.host("box").get("gpus") == 8 and hosts.node("box"), 30)
        # two GPUs fell off the bus: the next read finds six
        agent.settings = settings.model_copy(update={"standin_gpus": "H100:6"})
        wait_for(lambda: hosts.host("box").get("gpus") == 6, 30, "the smaller inventory")
        wait_for(lambda: hosts.node("box").get("gpu_count") == 6, 30, "the node to shrink")
        assert thread.is_alive() and hosts.host("box")["state"] == "ready"
    finally:
        stop.set()
        thread.join(30)
        remove_standin_spec(DEFAULT_FOLDER, standin_kind(hosts.name("box")))
