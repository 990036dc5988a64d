"""Factories for the placement engine's tests: nodes, fleets, requests, state snapshots."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields

import numpy as np

from cardhour.scheduler.request import Request
from cardhour.scheduler.state import FleetState, NodeInfo

# The arrays `assume`/`forget` change; `version` is left out on purpose (it only ever grows).
MUTABLE = ("cpu_free", "mem_free", "gpu_free", "exclusive", "tags", "hosted")


def make_node(
    name: str,
    gpus: int = 8,
    cpu: int = 96_000,
    mem: int = 393_216,
    model: str = "A100",
    domains: tuple[int, ...] = (),
    leaf: str | None = None,
    spine: str | None = None,
    dc: str = "dc1",
    schedulable: bool = True,
) -> NodeInfo:
    return NodeInfo(
        name=name,
        cpu_milli=cpu,
        memory_mib=mem,
        gpu_count=gpus,
        gpu_model=model if gpus else "",
        domains=domains,
        ib_leaf=leaf,
        ib_spine=spine,
        data_centre=dc,
        schedulable=schedulable,
    )


def make_state(*nodes: NodeInfo) -> FleetState:
    return FleetState.build(nodes)


def set_free(
    state: FleetState, node: int, gpu_free: Sequence[int], cpu_free: int | None = None
) -> None:
    """Force a node's free GPU milli (and CPU) as if pods we do not track were running there."""
    state.gpu_free[node, : len(gpu_free)] = gpu_free
    if cpu_free is not None:
        state.cpu_free[node] = cpu_free
    state.version[node] += 1


def one_node(gpu_free: Sequence[int], cpu_free: int = 96_000, model: str = "A100") -> FleetState:
    state = make_state(make_node("n0", gpus=len(gpu_free), model=model))
    set_free(state, 0, gpu_free, cpu_free)
    return state


def cpu_pod(rid: str, cpu: int = 1_000, mem: int = 0) -> Request:
    return Request(rid, cpu_milli=cpu, memory_mib=mem)


def share_pod(
    rid: str, milli: int, cpu: int = 1_000, models: frozenset[str] = frozenset()
) -> Request:
    return Request(rid, cpu_milli=cpu, num_gpu=1, gpu_milli=milli, gpu_models=models)


def gpu_pod(rid: str, k: int, cpu: int = 1_000, models: frozenset[str] = frozenset()) -> Request:
    return Request(rid, cpu_milli=cpu, num_gpu=k, gpu_milli=1000, gpu_models=models)


def unchecked_request(rid: str, **values: object) -> Request:
    """A Request built without `__post_init__`'s checks, to feed a score function a shape the
    engine itself never produces (e.g. a share of two GPUs, as in the FGD authors' unit tests)."""
    req = object.__new__(Request)
    defaults = {f.name: f.default for f in fields(Request) if f.name != "id"}
    for name, value in {"id": rid, **defaults, **values}.items():
        object.__setattr__(req, name, value)
    return req


def snapshot(state: FleetState) -> dict[str, np.ndarray]:
    return {name: getattr(state, name).copy() for name in MUTABLE}


def assert_unchanged(state: FleetState, before: dict[str, np.ndarray]) -> None:
    for name in MUTABLE:
        np.testing.assert_array_equal(getattr(state, name), before[name], err_msg=name)
