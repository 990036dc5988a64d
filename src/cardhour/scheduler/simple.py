"""The skeleton's placement policy: best-fit inside one node, whole nodes under fewest IB leaves.

- `count` ≤ GPUs per node: the fitting node with the fewest free GPUs (keeps whole nodes free),
  GPUs from one NVLink/PCIe domain (a node is one domain here).
- more: whole empty nodes in one data centre, on the fewest IB leaf switches (then spines).
The scheduler issue replaces this with the FGD-class engine behind the same `Policy` interface.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from cardhour.scheduler.interface import (
    NodeState,
    Placement,
    PlacementRequest,
    Snapshot,
    Unschedulable,
    summarise,
)


class SimplePolicy:
    name = "simple"

    def place(self, snapshot: Snapshot, request: PlacementRequest) -> Placement | Unschedulable:
        rejections: Counter[str] = Counter()
        candidates: list[NodeState] = []
        for node in snapshot.nodes:
            why = _filter(node, request)
            if why:
                rejections[why] += 1
            else:
                candidates.append(node)
        total = len(snapshot.nodes)
        if not candidates:
            return summarise(total, rejections)
        node_size = max(n.spec.gpu_count for n in candidates)
        if request.count <= node_size:
            return _place_in_one_node(candidates, request, rejections, total)
        return _place_whole_nodes(candidates, request, rejections, total)


def _filter(node: NodeState, request: PlacementRequest) -> str | None:
    if not node.schedulable:
        return "unschedulable"
    if node.spec.gpu_model not in request.gpu_models:
        return "wrong GPU model"
    if request.data_centre and node.spec.data_centre != request.data_centre:
        return "other data centre"
    return None


def _place_in_one_node(
    candidates: list[NodeState], request: PlacementRequest, rejections: Counter[str], total: int
) -> Placement | Unschedulable:
    fitting = []
    for node in candidates:
        if node.spec.gpu_count < request.count:
            rejections["too few GPUs per node"] += 1
        elif len(node.free_gpus) < request.count:
            rejections["insufficient free GPUs"] += 1
        else:
            fitting.append(node)
    if not fitting:
        return summarise(total, rejections)
    best = min(fitting, key=lambda n: (len(n.free_gpus), n.spec.id))
    gpus = sorted(best.free_gpus)[: request.count]
    spec = best.spec
    return Placement(
        {spec.id: gpus},
        spec.data_centre,
        (spec.ib_leaf,) if spec.ib_leaf else (),
        (spec.ib_spine,) if spec.ib_spine else (),
    )


def _place_whole_nodes(
    candidates: list[NodeState], request: PlacementRequest, rejections: Counter[str], total: int
) -> Placement | Unschedulable:
    sizes = {n.spec.gpu_count for n in candidates}
    size = max(sizes)
    if request.count % size:
        return Unschedulable(
            f"{request.count} GPUs span several nodes: ask for a multiple of {size} "
            "(whole nodes) or at most one node's worth"
        )
    wanted = request.count // size
    # (data centre, spine) -> leaf -> empty IB nodes
    blocks: dict[tuple[str, str], dict[str, list[NodeState]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for node in candidates:
        spec = node.spec
        if spec.gpu_count != size:
            rejections["other node size"] += 1
        elif not spec.ib_leaf or not spec.ib_spine:
            rejections["no InfiniBand"] += 1
        elif not node.is_empty:
            rejections["not a whole free node"] += 1
        else:
            blocks[(spec.data_centre, spec.ib_spine)][spec.ib_leaf].append(node)

    best: tuple[int, int, str, list[NodeState]] | None = None
    by_dc: dict[str, list[tuple[str, list[NodeState]]]] = defaultdict(list)
    for (dc, _spine), spine_leaves in blocks.items():
        by_dc[dc].extend(spine_leaves.items())
        chosen = _fewest_leaves(list(spine_leaves.items()), wanted)
        if chosen is not None:
            key = (len({n.spec.ib_leaf for n in chosen}), 1, dc, chosen)
            if best is None or key[:3] < best[:3]:
                best = key
    if best is None:  # no single spine can hold it: allow several spines within one data centre
        for dc, dc_leaves in sorted(by_dc.items()):
            chosen = _fewest_leaves(dc_leaves, wanted)
            if chosen is not None:
                spines = len({n.spec.ib_spine for n in chosen})
                key = (len({n.spec.ib_leaf for n in chosen}), spines, dc, chosen)
                if best is None or key[:3] < best[:3]:
                    best = key
    if best is None:
        most = max((sum(len(ns) for _, ns in leaves) for leaves in by_dc.values()), default=0)
        prefix = f"need {wanted} whole free nodes in one data centre, at most {most} free"
        return summarise(total, rejections, prefix)
    chosen = best[3]
    return Placement(
        {n.spec.id: list(range(n.spec.gpu_count)) for n in chosen},
        best[2],
        tuple(sorted({n.spec.ib_leaf for n in chosen if n.spec.ib_leaf})),
        tuple(sorted({n.spec.ib_spine for n in chosen if n.spec.ib_spine})),
    )


def _fewest_leaves(
    leaves: list[tuple[str, list[NodeState]]], wanted: int
) -> list[NodeState] | None:
    """Fewest leaves holding `wanted` nodes: one leaf if any fits (the tightest), else greedy."""
    if sum(len(ns) for _, ns in leaves) < wanted:
        return None
    single = [(len(ns), leaf, ns) for leaf, ns in leaves if len(ns) >= wanted]
    if single:
        _, _, nodes = min(single, key=lambda t: (t[0], t[1]))
        return sorted(nodes, key=lambda n: n.spec.id)[:wanted]
    chosen: list[NodeState] = []
    for _, nodes in sorted(leaves, key=lambda t: (-len(t[1]), t[0])):
        chosen.extend(sorted(nodes, key=lambda n: n.spec.id)[: wanted - len(chosen)])
        if len(chosen) == wanted:
            break
    return chosen
