"""Could a launch ever fit: the fleet's capacity summary, computed once per inventory version.

A launch is refused with `no_capacity` when it could not be placed even on an all-free fleet.
The summary answers that without loading the fleet or running a placement:

- The nodes are grouped into classes of nodes alike in everything that question reads:
  schedulable or not, data centre, GPU model and count, CPUs, memory, with an IB leaf or not
  (`store.compute.nodes.node_classes`, one GROUP BY: a few dozen rows for 10,000 nodes).
- A request runs the engine's own filter plugins over one node per class, each counted as
  many nodes as its class has (`scheduler.filters.run_filters` with weights), all free: a
  container or one bare-metal node fits iff some class passes; a gang of n whole nodes iff one
  data centre has n passing nodes (the engine's gang placement always succeeds then). The
  reason otherwise is the engine's, node counts included. `tests/services/test_capacity.py`
  checks every answer against a full placement on the all-free fleet, on varied fleets.
- The model shapes (`placement.NodeShape`) come from the classes too: a shape reads only the
  largest GPU count and the leanest CPU and memory per GPU of a model's nodes.
- Cached per process by the inventory version (`store.compute.nodes.inventory_version`: one
  primary-key read per launch). API processes sharing a PostgreSQL database read the same
  version, so each builds a version's summary once; a change commits with a new version.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from cardhour.core.errors import NoCapacity
from cardhour.core.topology import NodeSpec
from cardhour.scheduler import FleetState, Kind, Pending, Request
from cardhour.scheduler.filters import CONTAINER_FILTERS, NODE_FILTERS, pending_reason, run_filters
from cardhour.scheduler.framework import Context
from cardhour.services.compute import placement
from cardhour.store.compute import nodes as node_store

_KEEP = 4  # versions cached per process (a few: processes may briefly straddle a change)


@dataclass(frozen=True)
class FleetCapacity:
    """The fleet as classes of alike nodes, all free: `classes` holds one node per class,
    `counts[i]` the nodes of class i; `shapes` per GPU model, as `placement.node_shapes`
    gives them for the whole fleet."""

    classes: FleetState
    counts: np.ndarray
    shapes: dict[str, placement.NodeShape]
    _answers: dict[tuple[str, int, bool, str | None], str | None] = field(
        default_factory=dict, compare=False, repr=False
    )

    @classmethod
    def of(cls, rows: Sequence[Sequence[Any]]) -> FleetCapacity:
        """From `node_classes` rows: (schedulable, data centre, GPU model, GPUs, CPUs, memory
        GB, has an IB leaf, node count)."""
        infos = [
            placement.node_info(
                NodeSpec(
                    f"class-{i}", dc, model, gpus, cpus, mem, "ib" if ib else None, None, 0, 0
                ),
                nvlink=False,  # in-node domains decide where in a node, never whether
                schedulable=bool(schedulable),
            )
            for i, (schedulable, dc, model, gpus, cpus, mem, ib, _n) in enumerate(rows)
        ]
        state = FleetState.build(infos)
        counts = np.array([int(row[-1]) for row in rows], dtype=np.int64)
        return cls(state, counts, placement.node_shapes(state))

    @property
    def nodes(self) -> int:
        return int(self.counts.sum())

    def why_not(self, request: Request) -> str | None:
        """None when `request` could be placed on the fleet with every GPU free; else the
        placement engine's pending reason on that fleet."""
        kind = request.kind
        filters = NODE_FILTERS if kind in (Kind.NODE, Kind.GANG) else CONTAINER_FILTERS
        ctx = Context(self.classes, np.random.default_rng(0))  # filters draw nothing
        alive, counts = run_filters(ctx, request, filters, self.counts)
        total = self.nodes
        if kind is not Kind.GANG:
            return None if alive.any() else pending_reason(total, counts)
        n, free = request.nodes, int(self.counts[alive].sum())
        if free < n:
            return pending_reason(total, counts, f"need {n} whole free nodes, {free} free")
        per_dc = np.bincount(self.classes.dc[alive], weights=self.counts[alive])
        most = int(per_dc.max())
        if most < n:
            prefix = f"need {n} whole free nodes with InfiniBand in one data centre"
            return pending_reason(total, counts, f"{prefix}, at most {most} free")
        return None

    def check(
        self,
        gpu_model: str,
        count: int,
        bare_metal: bool = False,
        data_centre: str | None = None,
    ) -> None:
        """NoCapacity unless `count` × `gpu_model` (whole nodes with `bare_metal`, in
        `data_centre` when given) could be placed on the all-free fleet; the answer for each
        request is computed once."""
        key = (gpu_model, count, bare_metal, data_centre)
        if key not in self._answers:
            shapes = self.shapes
            request = placement.to_request(
                shapes, "launch", gpu_model, count, data_centre, bare_metal
            )
            self._answers[key] = (
                request.reason if isinstance(request, Pending) else self.why_not(request)
            )
        reason = self._answers[key]
        if reason is not None:
            where = f" in {data_centre}" if data_centre is not None else ""
            raise NoCapacity(
                f"no {count} × {gpu_model} can be placed{where} on this fleet: {reason}"
            )


_cache: OrderedDict[str, FleetCapacity] = OrderedDict()
_lock = threading.Lock()


def current(session: Session) -> FleetCapacity:
    """The summary of the fleet inventory as this transaction sees it: built from the nodes
    once per inventory version and process, then shared (it is never changed after)."""
    version = node_store.inventory_version(session)
    if version is not None:
        with _lock:
            found = _cache.get(version)
        if found is not None:
            return found
    built = FleetCapacity.of(node_store.node_classes(session))
    if version is not None:
        with _lock:
            _cache[version] = built
            while len(_cache) > _KEEP:
                _cache.popitem(last=False)
    return built
