"""The inventory reconciler compares the nodes with the backend's inventory only when either
moved: a tick with the inventory it last matched, at the same fleet inventory version, reads the
version and nothing else."""

from __future__ import annotations

import dataclasses

import pytest

from cardhour.db.engine import transaction
from cardhour.platform import Platform
from cardhour.services.compute import fleet
from cardhour.store.compute import nodes as node_store


def test_a_tick_with_nothing_moved_compares_nothing(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[int] = []
    real = fleet.sync_nodes

    def counting(session, inventory):  # type: ignore[no-untyped-def]
        compared.append(1)
        return real(session, inventory)

    monkeypatch.setattr(fleet, "sync_nodes", counting)
    platform.inventory.step()  # matches: remembered
    platform.inventory.step()
    platform.inventory.step()
    assert len(compared) == 1
    with transaction(platform.sessions) as s:  # an operator drains a node: the version moves
        node_store.drain(s, "bj1-a800-01", "test")
    platform.inventory.step()
    platform.inventory.step()
    assert len(compared) == 2
    # the backend reports a node changed: compared, and the change applied
    backend = platform.backend
    reported = backend.sync_inventory()
    bigger = [
        dataclasses.replace(n, cpus=n.cpus * 2) if n.id == "wh1-h100-01" else n for n in reported
    ]
    monkeypatch.setattr(backend, "sync_inventory", lambda: bigger)
    platform.inventory.step()
    assert len(compared) == 3
    with transaction(platform.sessions) as s:
        row = next(r for r in node_store.list_nodes(s) if r.id == "wh1-h100-01")
        assert row.cpus == 2 * next(n.cpus for n in reported if n.id == row.id)
    platform.inventory.step()  # the write moved the version: compared once more, then remembered
    platform.inventory.step()
    assert len(compared) == 4
