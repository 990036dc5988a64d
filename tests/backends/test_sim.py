"""The simulated backend honours the backend contract."""

from __future__ import annotations

from cardhour.backends.base import LaunchSpec, MachineState
from cardhour.backends.sim import SimBackend
from cardhour.core.clock import ManualClock
from cardhour.settings import load_catalog


def _spec(name: str = "ch-x-1") -> LaunchSpec:
    return LaunchSpec(name, "H100", 1, {"bj1-h100-01": [0]}, "pytorch-2.3-cuda12.3", None)


def test_provisioning_takes_the_configured_simulated_time() -> None:
    clock = ManualClock()
    sim = SimBackend(load_catalog(), clock, provision_seconds=10)
    sim.launch(_spec())
    assert sim.poll("ch-x-1").state == MachineState.PROVISIONING
    clock.advance(9.9)
    assert sim.poll("ch-x-1").state == MachineState.PROVISIONING
    clock.advance(0.1)
    result = sim.poll("ch-x-1")
    assert result.state == MachineState.RUNNING
    assert result.connection["simulated"] is True
    assert result.connection["host"].endswith(".invalid")


def test_launch_and_terminate_are_idempotent_by_name() -> None:
    clock = ManualClock()
    sim = SimBackend(load_catalog(), clock, provision_seconds=0)
    sim.launch(_spec())
    clock.advance(100)
    sim.launch(_spec())  # a retry must not restart or duplicate it
    assert sim.machines() == ["ch-x-1"]
    assert sim.poll("ch-x-1").state == MachineState.RUNNING
    sim.terminate("ch-x-1")
    sim.terminate("ch-x-1")
    assert sim.poll("ch-x-1").state == MachineState.GONE


def test_failures_on_demand_and_by_rate() -> None:
    clock = ManualClock()
    sim = SimBackend(load_catalog(), clock, provision_seconds=0)
    sim.fail_next()
    sim.launch(_spec("a"))
    sim.launch(_spec("b"))
    assert sim.poll("a").state == MachineState.FAILED
    assert sim.poll("b").state == MachineState.RUNNING
    always = SimBackend(load_catalog(), clock, fail_rate=1.0)
    always.launch(_spec("c"))
    assert always.poll("c").state == MachineState.FAILED


def test_state_file_survives_a_restart(tmp_path) -> None:  # type: ignore[no-untyped-def]
    clock = ManualClock()
    path = tmp_path / "sim.json"
    SimBackend(load_catalog(), clock, provision_seconds=0, state_file=path).launch(_spec())
    again = SimBackend(load_catalog(), clock, state_file=path)
    assert again.poll("ch-x-1").state == MachineState.RUNNING


def test_inventory_is_the_fleet_file() -> None:
    sim = SimBackend(load_catalog(), ManualClock())
    assert len(sim.sync_inventory()) == 44


def test_a_launch_for_other_nodes_swaps_them_and_a_stale_one_is_ignored() -> None:
    clock = ManualClock()
    sim = SimBackend(load_catalog(), clock, provision_seconds=10)
    every = list(range(8))
    first = LaunchSpec("ch-c-1", "H100", 16, {"bj1-h100-01": every, "bj1-h100-02": every}, "", None)
    sim.launch(first)
    clock.advance(10)
    swapped = LaunchSpec(
        **{
            **first.__dict__,
            "gpus_by_node": {"bj1-h100-01": every, "bj1-h100-03": every},
            "attempt": 2,
        }
    )
    sim.launch(swapped)
    assert sim.poll("ch-c-1").state == MachineState.PROVISIONING  # the new node boots
    clock.advance(10)
    assert sim.poll("ch-c-1").connection["nodes"] == ["bj1-h100-01", "bj1-h100-03"]
    sim.launch(first)  # a worker whose claim went stale: the swap stands
    assert sim.poll("ch-c-1").connection["nodes"] == ["bj1-h100-01", "bj1-h100-03"]
    assert sim.machines() == ["ch-c-1"]
