"""The control plane's adapter to the placement engine (`cardhour.scheduler`). Pure: no DB.

Contract:
- `build_state`: nodes and current allocations → a `FleetState`. CPU is `cpus × 1000` milli,
  memory `memory_gb × 1024` MiB. A model with NVLink is one GPU domain; any other node has two
  PCIe-switch domains (the first half of its GPUs, then the rest). An instance on one node is a
  container holding its GPUs and its model's CPU and memory share for k GPUs (`NodeShape`); an
  instance on several nodes is a gang holding each node whole. `build_held` also returns each
  instance's `Placement` as held (the running containers the defragmentation planner needs).
- `to_request`: an instance (GPU model, count, optional data centre) → a `Request`, or a
  `Pending` when no request can express the count. With `size` the GPUs of the model's largest
  node: count ≤ size → a container of `count` whole GPUs with the model's CPU and memory share;
  a multiple of size → a gang of `count / size` whole nodes; anything else → Pending
  ("… ask for a multiple of 8 (whole nodes) or at most one node's worth"). `bare_metal`: whole
  nodes only, one node included (an exclusive node request, placed only on an empty node).
  Instances in `exclusive` are rebuilt holding their nodes whole, like gangs.
- `assignment`: a `Placement` → node ids and GPU indices, what `AllocationRow`s hold.
- `typical_workload`: recent instance requests → FGD's typical workload M (a default of 1, 2,
  4 and 8 whole GPUs per model when there are none).
Pitfall: a container's CPU and memory are set per model, at the leanest CPU (and memory) per
GPU among that model's nodes (`NodeShape`), so they fit on any of its nodes; on a richer node
the rest stays free. The rebuild charges the same amounts, so a cycle and the next agree.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from cardhour.core.topology import NodeSpec
from cardhour.scheduler import (
    MAX_GANG_NODES,
    MILLI,
    Binding,
    FleetState,
    NodeInfo,
    Pending,
    Placement,
    Request,
    TypicalWorkload,
)

DEFAULT_SIZES = (1, 2, 4, 8)  # the typical workload when no instance was ever requested

#: instance id → node id → GPU indices it holds there
Allocations = Mapping[str, Mapping[str, Collection[int]]]


@dataclass(frozen=True)
class Share:
    """Capacity held on one node by something other than an instance (an app replica):
    `milli` of each GPU in `gpus` (none: CPU and memory only)."""

    holder: str
    node: str
    gpus: tuple[int, ...]
    milli: int
    cpu_milli: int
    memory_mib: int


def gpu_domains(gpu_count: int, nvlink: bool) -> tuple[int, ...]:
    """GPU g's in-node domain: one NVLink domain, or two PCIe switches of half the GPUs each."""
    if nvlink:
        return (0,) * gpu_count
    half = gpu_count // 2
    return (0,) * half + (1,) * (gpu_count - half)


def node_info(spec: NodeSpec, nvlink: bool, schedulable: bool = True) -> NodeInfo:
    return NodeInfo(
        name=spec.id,
        cpu_milli=spec.cpus * 1000,
        memory_mib=spec.memory_gb * 1024,
        gpu_count=spec.gpu_count,
        gpu_model=spec.gpu_model,
        domains=gpu_domains(spec.gpu_count, nvlink),
        ib_leaf=spec.ib_leaf,
        ib_spine=spec.ib_spine,
        data_centre=spec.data_centre,
        schedulable=schedulable,
    )


def build_state(
    specs: Sequence[NodeSpec],
    nvlink_models: Collection[str],
    unschedulable: Collection[str] = (),
    allocations: Allocations | None = None,
) -> FleetState:
    """The fleet with every allocation held (containers first, then gangs)."""
    return build_held(specs, nvlink_models, unschedulable, allocations)[0]


def build_held(
    specs: Sequence[NodeSpec],
    nvlink_models: Collection[str],
    unschedulable: Collection[str] = (),
    allocations: Allocations | None = None,
    exclusive: Collection[str] = (),
    shares: Sequence[Share] = (),
) -> tuple[FleetState, dict[str, Placement]]:
    """`build_state`, plus the placement held for each instance (instance id → `Placement`, as
    assumed on the state; an instance none of whose GPUs exist on a known node is left out).
    `shares` are held on the state too, after the instances (not in the returned map); one
    that no longer fits its node (the node shrank) holds its GPUs only, or nothing."""
    state = FleetState.build(
        [node_info(s, s.gpu_model in nvlink_models, s.id not in unschedulable) for s in specs]
    )
    held = sorted((allocations or {}).items(), key=lambda kv: (len(kv[1]) > 1, kv[0]))
    shapes = node_shapes(state)
    placements: dict[str, Placement] = {}
    for instance_id, on_nodes in held:
        placed = _hold(state, shapes, instance_id, on_nodes, instance_id in exclusive)
        if placed.bindings:
            placements[instance_id] = placed
    for share in shares:
        _hold_share(state, share)
    return state, placements


def _hold_share(state: FleetState, share: Share) -> None:
    i = state.index.get(share.node)
    if i is None:
        return
    gpus = tuple(g for g in share.gpus if 0 <= g < int(state.gpu_count[i]))
    binding = Binding(i, gpus, share.milli if gpus else 0, share.cpu_milli, share.memory_mib)
    for held in (binding, replace(binding, cpu_milli=0, memory_mib=0)):
        try:
            state.assume(Placement(share.holder, (held,)))
            return
        except ValueError:
            continue


def _hold(
    state: FleetState,
    shapes: Mapping[str, NodeShape],
    instance_id: str,
    on_nodes: Mapping[str, Collection[int]],
    exclusive: bool = False,
) -> Placement:
    gang = len(on_nodes) > 1 or exclusive
    bindings = []
    for name, gpus in sorted(on_nodes.items()):
        i = state.index.get(name)
        if i is None:
            continue
        n = int(state.gpu_count[i])
        held = tuple(sorted(g for g in gpus if 0 <= g < n))
        if not held:
            continue
        cpu, mem = int(state.cpu_cap[i]), int(state.mem_cap[i])
        if gang:
            bindings.append(Binding(i, held, MILLI, cpu, mem, exclusive=True))
        else:
            k = len(held)
            shape = shapes.get(state.models[state.model[i]])
            if shape is not None:  # what `to_request` asked for, whatever node it landed on
                cpu, mem = shape.cpu_share(k), shape.memory_share(k)
            else:
                cpu, mem = cpu * k // n, mem * k // n
            bindings.append(Binding(i, held, MILLI, cpu, mem, tag=min(k, 8)))
    placed = Placement(instance_id, tuple(bindings))
    try:
        state.assume(placed)
    except ValueError:
        # The DB and the node disagree (a node resized under running work): hold the GPUs only;
        # the unique (node, GPU) constraint makes that always consistent.
        gpus_only = tuple(
            replace(b, cpu_milli=0, memory_mib=0, exclusive=False, tag=None) for b in bindings
        )
        placed = Placement(instance_id, gpus_only)
        state.assume(placed)
    return placed


@dataclass(frozen=True)
class NodeShape:
    """A model's largest node size, with the CPU and memory such a node would have at the
    leanest CPU (and memory) per GPU among the model's nodes. A container of k GPUs asks for
    `cpu_share(k)` and `memory_share(k)`, which fit on any node of the model that has k GPUs
    free; a gang takes whole nodes."""

    gpus: int
    cpu_milli: int
    memory_mib: int

    def cpu_share(self, k: int) -> int:
        return self.cpu_milli * k // self.gpus

    def memory_share(self, k: int) -> int:
        return self.memory_mib * k // self.gpus


def node_shapes(state: FleetState) -> dict[str, NodeShape]:
    """Per GPU model, the shape of its largest schedulable node (of any node if none is)."""
    shapes: dict[str, NodeShape] = {}
    for code, model in enumerate(state.models):
        nodes = np.flatnonzero((state.model == code) & (state.gpu_count > 0))
        live = nodes[state.schedulable[nodes]]
        nodes = live if len(live) else nodes
        if not len(nodes):
            continue
        size = int(state.gpu_count[nodes].max())
        gpus = state.gpu_count[nodes]
        shapes[model] = NodeShape(
            size,
            int((state.cpu_cap[nodes] * size // gpus).min()),
            int((state.mem_cap[nodes] * size // gpus).min()),
        )
    return shapes


def to_request(
    shapes: Mapping[str, NodeShape],
    request_id: str,
    gpu_model: str,
    count: int,
    data_centre: str | None = None,
    bare_metal: bool = False,
    node: str | None = None,
) -> Request | Pending:
    """The scheduler's request for `count` GPUs of `gpu_model` (in `data_centre`, on `node`
    when given), or why none can express it."""
    models = frozenset({gpu_model})
    shape = shapes.get(gpu_model)
    if shape is None:  # no node has this model: the engine's filters say so ("44 wrong GPU model")
        return Request(request_id, 0, 0, count, MILLI, models, data_centre=data_centre, node=node)
    size = shape.gpus
    if bare_metal and count % size:
        return Pending(f"bare metal takes whole nodes: ask for a multiple of {size} GPUs")
    if count <= size and not bare_metal:
        cpu, mem = shape.cpu_share(count), shape.memory_share(count)
        return Request(
            request_id, cpu, mem, count, MILLI, models, data_centre=data_centre, node=node
        )
    if count % size:
        return Pending(
            f"{count} GPUs span several nodes: ask for a multiple of {size} (whole nodes) "
            "or at most one node's worth"
        )
    nodes = count // size  # 1 (bare metal): one whole node, exclusive, only on an empty one
    if nodes > MAX_GANG_NODES:
        return Pending(f"{count} GPUs need {nodes} whole nodes; at most {MAX_GANG_NODES} fit")
    return Request(
        request_id,
        shape.cpu_milli,
        shape.memory_mib,
        size,
        MILLI,
        models,
        nodes=nodes,
        data_centre=data_centre,
        node=node,
    )


@dataclass(frozen=True)
class Assignment:
    """A placement as the DB records it: GPU indices by node id."""

    gpus_by_node: dict[str, list[int]]
    data_centre: str
    ib_leaves: tuple[str, ...] = ()
    ib_spines: tuple[str, ...] = ()


def assignment(state: FleetState, placement: Placement) -> Assignment:
    gpus = {state.names[b.node]: sorted(b.gpus) for b in placement.bindings}
    first = placement.bindings[0].node
    return Assignment(gpus, state.dcs[state.dc[first]], placement.leaves, placement.spines)


def typical_workload(
    shapes: Mapping[str, NodeShape], recent: Iterable[tuple[str, int]]
) -> TypicalWorkload:
    """FGD's typical workload from recent requests `(gpu_model, count)`; those no request can
    express are left out. With none: 1, 2, 4 and 8 whole GPUs of each model in the fleet."""
    requests = _requests(shapes, recent)
    if not requests:
        requests = _requests(shapes, [(m, k) for m in sorted(shapes) for k in DEFAULT_SIZES])
    if not requests:  # no GPU node at all: anything will do
        requests = [Request("default", num_gpu=1, gpu_milli=MILLI)]
    return TypicalWorkload.from_requests(requests)


def _requests(shapes: Mapping[str, NodeShape], wanted: Iterable[tuple[str, int]]) -> list[Request]:
    found = (to_request(shapes, f"w{i}", m, k) for i, (m, k) in enumerate(wanted))
    return [r for r in found if isinstance(r, Request)]
