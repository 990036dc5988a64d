"""Invariants of the engine under any sequence of requests and releases, for several policies.

- no GPU above 1000 milli used, no CPU or memory over capacity (0 ≤ free ≤ capacity);
- what is free is exactly capacity minus the live placements (a ledger check);
- placements honour the GPU model and whole-node size;
- a gang is placed whole (n distinct exclusive nodes) or stays pending with the state unchanged;
- a whole node (bare metal or gang member) carries no other binding while held;
- releasing everything gives back the empty fleet.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cardhour.scheduler.engine import Scheduler
from cardhour.scheduler.frag import TypicalWorkload
from cardhour.scheduler.profiles import DEFAULT_POLICY
from cardhour.scheduler.request import Kind, Pending, Placement, Request
from cardhour.scheduler.state import FleetState, NodeInfo
from tests.scheduler.factories import assert_unchanged, make_node, snapshot

POLICIES = tuple(dict.fromkeys(("bestfit", "fgd", "packing", DEFAULT_POLICY)))
MODELS = ("A100", "H100")
LEAF_SPINE = {"L0": "S0", "L1": "S0", "L2": "S1"}


@st.composite
def fleets(draw: st.DrawFn) -> list[NodeInfo]:
    n = draw(st.integers(2, 6))
    nodes = []
    for i in range(n):
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        leaf = draw(st.sampled_from([None, "L0", "L1", "L2"]))
        domains = (0, 0, 0, 0, 1, 1, 1, 1) if gpus == 8 and draw(st.booleans()) else ()
        nodes.append(
            make_node(
                f"n{i}",
                gpus=gpus,
                cpu=draw(st.sampled_from([8_000, 32_000, 96_000])),
                mem=draw(st.sampled_from([16_384, 262_144])),
                model=draw(st.sampled_from(MODELS)),
                domains=domains,
                leaf=leaf,
                spine=LEAF_SPINE[leaf] if leaf else None,
            )
        )
    return nodes


models = st.sampled_from([frozenset(), frozenset({"A100"}), frozenset({"H100"})])
cpu = st.integers(0, 16).map(lambda x: x * 1000)
mem = st.integers(0, 4).map(lambda x: x * 8192)


@st.composite
def requests(draw: st.DrawFn, rid: str) -> Request:
    kind = draw(st.sampled_from(list(Kind)))
    if kind is Kind.CPU:
        return Request(rid, cpu_milli=draw(cpu), memory_mib=draw(mem))
    if kind is Kind.SHARE:
        milli = draw(st.integers(1, 999))
        return Request(rid, draw(cpu), draw(mem), 1, milli, gpu_models=draw(models))
    if kind is Kind.GPUS:
        k = draw(st.sampled_from([1, 2, 3, 4, 8]))
        return Request(rid, draw(cpu), draw(mem), k, 1000, gpu_models=draw(models))
    size = draw(st.sampled_from([0, 1, 2, 4, 8]))
    n = 1 if kind is Kind.NODE else draw(st.integers(2, 4))
    return Request(rid, num_gpu=size, nodes=n, gpu_models=draw(models))


@dataclass(frozen=True)
class Release:
    which: int  # index into the live placements, modulo their count


@st.composite
def scripts(draw: st.DrawFn) -> list[Request | Release]:
    steps: list[Request | Release] = []
    for i in range(draw(st.integers(1, 25))):
        if draw(st.integers(0, 3)) == 0:
            steps.append(Release(draw(st.integers(0, 100))))
        else:
            steps.append(draw(requests(f"r{i}")))
    return steps


def workload_for(steps: list[Request | Release]) -> TypicalWorkload:
    tasks = [s for s in steps if isinstance(s, Request) and not s.nodes]
    return TypicalWorkload.from_requests(tasks or [Request("t", cpu_milli=1000)])


def check_invariants(state: FleetState, live: list[Placement]) -> None:
    assert ((state.gpu_free >= 0) & (state.gpu_free <= 1000)).all()
    assert (state.gpu_free[~state.gpu_real] == 0).all()
    assert ((state.cpu_free >= 0) & (state.cpu_free <= state.cpu_cap)).all()
    assert ((state.mem_free >= 0) & (state.mem_free <= state.mem_cap)).all()
    gpu_used = np.zeros_like(state.gpu_free)
    cpu_used = np.zeros_like(state.cpu_free)
    mem_used = np.zeros_like(state.mem_free)
    holders: dict[int, int] = {}
    bindings_on: dict[int, int] = {}
    for p in live:
        for b in p.bindings:
            gpu_used[b.node, list(b.gpus)] += b.milli
            cpu_used[b.node] += b.cpu_milli
            mem_used[b.node] += b.memory_mib
            bindings_on[b.node] = bindings_on.get(b.node, 0) + 1
            if b.exclusive:
                holders[b.node] = holders.get(b.node, 0) + 1
    np.testing.assert_array_equal(state.gpu_free, np.where(state.gpu_real, 1000, 0) - gpu_used)
    np.testing.assert_array_equal(state.cpu_free, state.cpu_cap - cpu_used)
    np.testing.assert_array_equal(state.mem_free, state.mem_cap - mem_used)
    assert sorted(holders) == np.flatnonzero(state.exclusive).tolist()
    for node, count in holders.items():
        assert count == 1 and bindings_on[node] == 1, f"{state.names[node]} shared while held"


def play(nodes: list[NodeInfo], steps: list[Request | Release], policy: str) -> None:
    state = FleetState.build(nodes)
    empty = snapshot(state)
    scheduler = Scheduler(policy, workload_for(steps), seed=1)
    live: list[Placement] = []
    for step in steps:
        if isinstance(step, Release):
            if live:
                state.forget(live.pop(step.which % len(live)))
        else:
            before = snapshot(state)
            decision = scheduler.bind(state, step)
            if isinstance(decision, Pending):
                assert_unchanged(state, before)
            else:
                live.append(decision)
                for b in decision.bindings:
                    model = state.model[b.node]
                    assert not step.gpu_models or state.models[model] in step.gpu_models
                    assert not (step.nodes and step.num_gpu) or (
                        state.gpu_count[b.node] == step.num_gpu
                    )
                if step.nodes:
                    assert len(decision.bindings) == step.nodes == len(set(decision.nodes))
                    assert all(b.exclusive for b in decision.bindings)
                else:
                    assert len(decision.bindings) == 1
                    gpus = decision.bindings[0].gpus
                    assert len(gpus) == step.num_gpu == len(set(gpus))
        check_invariants(state, live)
    for placement in live:  # in placement order, not the reverse
        state.forget(placement)
    assert_unchanged(state, empty)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=fleets(), steps=scripts())
def test_invariants_hold_for_every_policy(nodes: list[NodeInfo], steps: list) -> None:
    for policy in POLICIES:
        play(nodes, steps, policy)
