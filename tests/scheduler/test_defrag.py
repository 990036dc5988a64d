"""Table tests for the defragmentation planner: a fleet with running containers + a request that
does not fit → the moves (fewest first) and the node(s) it then lands on, or why none exist.

Every plan is checked by applying its moves on a copy of the fleet: the request must then fit
exactly where the plan says, unmovable containers never move, and the input state is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from cardhour.scheduler import profiles  # noqa: F401  (registers the profiles)
from cardhour.scheduler.defrag.plan import DefragPlan, Move, apply_plan, plan_defrag
from cardhour.scheduler.engine import Scheduler
from cardhour.scheduler.gang import whole_node_binding
from cardhour.scheduler.request import Binding, Pending, Placement, Request
from cardhour.scheduler.state import FleetState, NodeInfo

TWO_DOMAINS = (0, 0, 0, 0, 1, 1, 1, 1)


def node(
    name: str,
    gpus: int = 8,
    domains: tuple[int, ...] = (),
    leaf: str | None = "leaf1",
    spine: str | None = "spine1",
    model: str = "H100",
    cpu: int = 128_000,
) -> NodeInfo:
    return NodeInfo(name, cpu, 1_048_576, gpus, model, domains, leaf, spine, "dc1")


def box(
    cid: str, gpus: int = 1, milli: int = 1000, cpu: int = 1000, movable: bool = True
) -> Request:
    """A running container: `gpus` GPUs with `milli` each (a share when milli < 1000)."""
    return Request(cid, cpu, 1024, gpus, milli if gpus else 0, movable=movable)


def metal(cid: str, movable: bool = True) -> Request:
    return Request(cid, nodes=1, movable=movable)


# (request, node name, GPUs); a whole-node request takes the node whole.
Running = tuple[Request, str, tuple[int, ...]]


@dataclass
class Case:
    name: str
    nodes: list[NodeInfo]
    running: list[Running]
    request: Request
    moves: list[tuple[str, str, str]] | None = None  # (container, from, to), in order
    target: tuple[str, ...] = ()
    pending: list[str] = field(default_factory=list)  # phrases the reason must contain


def build(case: Case) -> tuple[FleetState, list[tuple[Request, Placement]]]:
    state = FleetState.build(case.nodes)
    running: list[tuple[Request, Placement]] = []
    for req, name, gpus in case.running:
        i = state.index[name]
        if req.nodes:
            binding = whole_node_binding(state, i)
        else:
            binding = Binding(i, gpus, req.gpu_milli, req.cpu_milli, req.memory_mib, tag=req.tag)
        placement = Placement(req.id, (binding,))
        state.assume(placement)
        running.append((req, placement))
    return state, running


CASES = [
    Case(
        "8 GPUs: one 4-GPU move beats two 1-GPU moves",
        [node(name, domains=TWO_DOMAINS) for name in "abc"],
        [
            (box("quad", 4), "a", (0, 1, 2, 3)),
            (box("b1"), "b", (0,)),
            (box("b2"), "b", (4,)),
            (box("c1"), "c", (0,)),
            (box("c2"), "c", (1,)),
            (box("c3"), "c", (2,)),
        ],
        box("big", 8),
        moves=[("quad", "a", "c")],  # best fit: c keeps 1 GPU free, b would keep 2
        target=("a",),
    ),
    Case(
        "unmovable containers stay: the node with more, movable, moves is freed",
        [node("a"), node("b"), node("c")],
        [
            (box("pinned", movable=False), "a", (0,)),
            (box("b1"), "b", (0,)),
            (box("b2"), "b", (1,)),
            (box("c1"), "c", (0,)),
            (box("c2"), "c", (1,)),
            (box("c3"), "c", (2,)),
        ],
        box("big", 8),
        moves=[("b1", "b", "c"), ("b2", "b", "c")],
        target=("b",),
    ),
    Case(
        "only unmovable containers block",
        [node("a"), node("b")],
        [(box("p1", movable=False), "a", (0,)), (box("p2", movable=False), "b", (3,))],
        box("big", 8),
        pending=["no node can be freed", "2 hold unmovable containers"],
    ),
    Case(
        "moved containers would fit nowhere else",
        [node("a"), node("b"), node("c", model="A100")],
        [
            (box("quad", 4), "a", (0, 1, 2, 3)),
            (box("quad2", 4), "b", (0, 1, 2, 3)),
            (box("pin", 2, movable=False), "b", (4, 5)),
            (box("pin2", 8, movable=False), "c", tuple(range(8))),
        ],
        Request("big", num_gpu=8, gpu_milli=1000, gpu_models=frozenset({"H100"})),
        pending=["1 wrong GPU model", "1 nodes whose containers fit nowhere else", "1 hold unmov"],
    ),
    Case(
        "a request that fits gets no moves",
        [node("a"), node("b")],
        [(box("a1", 4), "a", (0, 1, 2, 3))],
        box("big", 8),
        moves=[],
        target=("b",),
    ),
    Case(
        "two shares on one GPU both move to free it",
        [node("a"), node("b")],
        [
            (box("s1", milli=300), "a", (0,)),
            (box("s2", milli=400), "a", (0,)),
            (box("seven", 7, movable=False), "b", tuple(range(7))),
        ],
        box("big", 8),
        moves=[("s2", "a", "b"), ("s1", "a", "b")],
        target=("a",),
    ),
    Case(
        "a share needs one neighbour gone: the smallest that makes room",
        [node("a", gpus=1), node("b", gpus=1)],
        [
            (box("s500", milli=500), "a", (0,)),
            (box("s300", milli=300), "a", (0,)),
            (box("pin", milli=700, movable=False), "b", (0,)),
        ],
        box("half", milli=400),
        moves=[("s300", "a", "b")],
        target=("a",),
    ),
    Case(
        "CPU short: a CPU-only container moves too",
        [node("a", cpu=16_000), node("b", cpu=16_000)],
        [
            (box("cpu", gpus=0, cpu=12_000), "a", ()),
            (box("pin", 8, cpu=2_000, movable=False), "b", tuple(range(8))),
        ],
        box("job", 1, cpu=8_000),
        moves=[("cpu", "a", "b")],
        target=("a",),
    ),
    Case(
        "bare metal: the node with the fewest moves is emptied",
        [node("a"), node("b"), node("c")],
        [
            (box("a1"), "a", (0,)),
            (box("a2"), "a", (1,)),
            (box("b1", 2), "b", (0, 1)),
            (box("c1", movable=False), "c", (0,)),
        ],
        metal("bm"),
        moves=[("b1", "b", "a")],
        target=("b",),
    ),
    Case(
        "a movable bare-metal tenant moves to free the only A100 node",
        [node("a", model="A100"), node("b")],
        [(metal("tenant"), "a", ())],
        Request("job", num_gpu=4, gpu_milli=1000, gpu_models=frozenset({"A100"})),
        moves=[("tenant", "a", "b")],
        target=("a",),
    ),
    Case(
        "gang of 2: the leaf needing one move",
        [
            node("a1", leaf="leaf1"),
            node("a2", leaf="leaf1"),
            node("b1", leaf="leaf2"),
            node("b2", leaf="leaf2"),
            node("x", leaf=None),
        ],
        [
            (box("a1c"), "a1", (0,)),
            (box("a2c"), "a2", (0,)),
            (box("b2c"), "b2", (0,)),
        ],
        Request("gang", nodes=2, num_gpu=8),
        moves=[("b2c", "b2", "a1")],
        target=("b1", "b2"),
    ),
    Case(
        "gang of 2: one leaf with more moves beats two leaves with fewer",
        [
            node("a1", leaf="leaf1"),
            node("a2", leaf="leaf1"),
            node("b1", leaf="leaf2"),
            node("b2", leaf="leaf2"),
            node("x", leaf=None),
        ],
        [
            (box("a2c1"), "a2", (0,)),
            (box("a2c2"), "a2", (1,)),
            (box("b1c"), "b1", (0,)),
            (box("b2p", movable=False), "b2", (0,)),
        ],
        Request("gang", nodes=2, num_gpu=8),
        moves=[("a2c1", "a2", "b1"), ("a2c2", "a2", "b1")],
        target=("a1", "a2"),
    ),
    Case(
        "gang: too few freeable nodes",
        [node("a1"), node("a2"), node("x", leaf=None)],
        [(box("p", movable=False), "a2", (0,))],
        Request("gang", nodes=2, num_gpu=8),
        pending=["need 2 freeable nodes", "1 found", "1 hold unmovable", "1 no InfiniBand"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_defrag_table(case: Case) -> None:
    state, running = build(case)
    before = state.copy()
    result = plan_defrag(state, running, case.request, Scheduler("bestfit"))
    assert np.array_equal(state.gpu_free, before.gpu_free)
    assert np.array_equal(state.schedulable, before.schedulable)
    assert np.array_equal(state.cpu_free, before.cpu_free)
    if case.pending:
        assert isinstance(result, Pending), result
        for phrase in case.pending:
            assert phrase in result.reason
        return
    assert isinstance(result, DefragPlan), result
    assert [(m.container_id, m.from_node, m.to_node) for m in result.moves] == case.moves
    assert result.target_nodes == case.target
    unmovable = {req.id for req, _ in running if not req.movable}
    assert not unmovable & {m.container_id for m in result.moves}
    after = state.copy()
    apply_plan(after, running, result)
    placed = Scheduler("bestfit").place(after, case.request)
    assert isinstance(placed, Placement), placed
    assert tuple(after.names[i] for i in placed.nodes) == case.target


def test_moves_name_the_gpus_they_take() -> None:
    """c has GPU 3 free in domain 0 and 4-7 in domain 1: the quad keeps to one domain."""
    state, running = build(CASES[0])
    plan = plan_defrag(state, running, box("big", 8), Scheduler("bestfit"))
    assert plan == DefragPlan("big", (Move("quad", "a", "c", (4, 5, 6, 7)),), ("a",))


def test_an_allocation_not_listed_blocks_its_node() -> None:
    state, running = build(CASES[4])
    state.assume(Placement("ghost", (Binding(1, (7,), 1000, 0, 0),)))
    result = plan_defrag(state, running, box("big", 8), Scheduler("bestfit"))
    assert isinstance(result, DefragPlan)
    assert result.target_nodes == ("a",)
    state.assume(Placement("ghost2", (Binding(0, (7,), 1000, 0, 0),)))
    result = plan_defrag(state, running, box("big", 8), Scheduler("bestfit"))
    assert isinstance(result, Pending)
    assert result.counts == {"hold allocations not listed as running": 2}
