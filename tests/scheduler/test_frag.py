"""FGD's fragmentation measure F_n(M) (FGD_BENCHMARK.md §2.2), with the authors' unit vectors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardhour.scheduler.fgd.score import fragment_after
from cardhour.scheduler.frag import FragMeter, TypicalWorkload
from cardhour.scheduler.gpusel import share_gpu, whole_gpus
from cardhour.scheduler.request import Binding, Kind, Placement, Request
from tests.scheduler.factories import make_node, make_state, one_node, set_free


def workload(*types: tuple[int, int, int, frozenset[str], float]) -> TypicalWorkload:
    """Types as (cpu, per-GPU milli, GPU count, allowed models, p); p is used as given."""
    return TypicalWorkload(
        cpu=np.array([t[0] for t in types], dtype=np.int64),
        milli=np.array([t[1] for t in types], dtype=np.int64),
        count=np.array([t[2] for t in types], dtype=np.int64),
        models=tuple(t[3] for t in types),
        p=np.array([t[4] for t in types], dtype=np.float64),
    )


ANY: frozenset[str] = frozenset()


def frag_of(state_gpus: list[int], cpu_free: int, w: TypicalWorkload, model: str = "A100") -> float:
    return float(FragMeter(one_node(state_gpus, cpu_free, model), w).frag[0])


# --- The authors' vectors (pkg/utils/frag_test.go) ---------------------------------------------


def test_typical_share_task_on_a_cpu_starved_node_is_q4() -> None:
    w = workload((6000, 465, 1, ANY, 0.0933))
    assert frag_of([200, 1000, 1000, 500], 1000, w) == pytest.approx(0.0933 * 2700)
    assert frag_of([200, 1000, 1000, 500], 1000, w) == pytest.approx(251.91)


def thirty_five_types() -> TypicalWorkload:
    """A stand-in for the authors' 35-entry list: every type needs more than 1000m CPU, the
    probabilities are uneven and sum to 0.9506 (not renormalised, as in their test)."""
    shapes = [(0, 0), (1000, 1), (1000, 2), (1000, 4), (1000, 8), (500, 1), (250, 1)]
    raw = np.arange(1, 36, dtype=np.float64)
    p = raw / raw.sum() * 0.9506
    types = [
        (2000 + 1000 * i, shapes[i % 7][0], shapes[i % 7][1], ANY, float(p[i])) for i in range(35)
    ]
    return workload(*types)


@pytest.mark.parametrize("gpus, expected", [(4, 3802.40), (8, 7604.80)])
def test_thirty_five_types_on_a_cpu_starved_node(gpus: int, expected: float) -> None:
    w = thirty_five_types()
    assert len(w) == 35 and w.p.sum() == pytest.approx(0.9506)
    assert frag_of([1000] * gpus, 1000, w) == pytest.approx(expected)


# --- One task type per row: (name, GPUs free, CPU free, node model, type, F_n(m)) ---------------

CASES = [
    # Q3: fits; only the GPUs too small for the task count.
    ("satisfied: small GPUs only", [200, 1000, 300, 600], 4000, "A100", (1000, 500, 1, ANY), 500),
    ("satisfied: nothing small", [1000, 500], 4000, "A100", (1000, 500, 1, ANY), 0),
    ("satisfied whole GPUs", [1000, 1000, 500, 0], 4000, "A100", (1000, 1000, 2, ANY), 500),
    # Q2: the GPUs do not fit (too few whole GPUs): every idle GPU is a fragment.
    ("gpu lacking", [1000, 1000, 1000, 500], 4000, "A100", (1000, 1000, 4, ANY), 3500),
    # Q4: GPUs fit, CPU lacking.
    ("cpu lacking", [1000, 300], 500, "A100", (1000, 500, 1, ANY), 1300),
    # Q1: neither fits.
    ("both lacking", [300, 300], 500, "A100", (1000, 500, 1, ANY), 600),
    # CPU-only tasks: all idle GPU is fragment, whether the CPU fits or not.
    ("cpu-only, cpu fits", [200, 1000, 0, 500], 4000, "A100", (1000, 0, 0, ANY), 1700),
    ("cpu-only, cpu lacking", [200, 1000, 0, 500], 500, "A100", (1000, 0, 0, ANY), 1700),
    # NoAccess: the node's model is not allowed.
    ("wrong model", [200, 1000], 4000, "A100", (1000, 500, 1, frozenset({"V100"})), 1200),
    ("allowed model", [200, 1000], 4000, "V100", (1000, 500, 1, frozenset({"V100"})), 200),
    ("idle node", [0, 0], 4000, "A100", (1000, 500, 1, ANY), 0),
]


@pytest.mark.parametrize(
    "gpus, cpu, model, task, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_node_frag_for_one_task_type(
    gpus: list[int],
    cpu: int,
    model: str,
    task: tuple[int, int, int, frozenset[str]],
    expected: int,
) -> None:
    assert frag_of(gpus, cpu, workload((*task, 1.0)), model) == pytest.approx(expected)


def test_node_frag_is_the_p_weighted_sum_and_the_cluster_frag_the_node_sum() -> None:
    w = workload((1000, 500, 1, ANY, 0.25), (1000, 0, 0, ANY, 0.75))
    state = make_state(make_node("a", gpus=2), make_node("b", gpus=2))
    set_free(state, 0, [200, 1000])
    set_free(state, 1, [1000, 1000])
    meter = FragMeter(state, w)
    assert meter.frag.tolist() == pytest.approx([0.25 * 200 + 0.75 * 1200, 0.75 * 2000])
    assert meter.total() == pytest.approx(meter.frag.sum())


def test_cpu_only_node_has_no_fragments() -> None:
    state = make_state(make_node("cpu", gpus=0), make_node("gpu", gpus=1))
    w = workload((1000, 500, 1, frozenset({"A100"}), 0.5), (1000, 0, 0, ANY, 0.5))
    assert FragMeter(state, w).frag.tolist() == pytest.approx([0, 500])


# --- The meter's cache ---------------------------------------------------------------------------


def test_meter_recomputes_only_the_rows_that_changed() -> None:
    state = make_state(*(make_node(f"n{i}", gpus=4) for i in range(3)))
    meter = FragMeter(state, workload((1000, 500, 1, ANY, 0.5), (0, 1000, 2, ANY, 0.5)))
    before = meter.frag.copy()
    meter.frag[0] = -1.0  # a sentinel: recomputing row 0 would overwrite it
    state.assume(Placement("p", (Binding(1, (0,), 700, 1000, 0),)))
    meter.refresh()
    assert meter.frag[0] == -1.0
    assert meter.frag[1] != before[1]
    assert meter.frag[1] == pytest.approx(0.5 * 300 + 0.5 * 300)  # 300 is small for both
    assert meter.frag[2] == before[2]


# --- The target workload from a trace -----------------------------------------------------------


def requests(shape: Request, n: int) -> list[Request]:
    return [replace(shape, id=f"{shape.id}-{i}") for i in range(n)]


def test_typical_workload_keeps_types_up_to_95_percent_and_renormalises() -> None:
    a = Request("a", cpu_milli=4000, num_gpu=1, gpu_milli=1000)
    b = Request("b", cpu_milli=2000, num_gpu=1, gpu_milli=500)
    c = Request("c", cpu_milli=8000)
    d = Request("d", cpu_milli=2000, num_gpu=1, gpu_milli=500, gpu_models=frozenset({"T4"}))
    e = Request("e", cpu_milli=16000, num_gpu=8, gpu_milli=1000)
    pods = requests(a, 50) + requests(b, 30) + requests(c, 15) + requests(d, 3) + requests(e, 2)
    w = TypicalWorkload.from_requests(pods)
    # 50 + 30 + 15 = 95 of 100 reaches the cut exactly; d and e are dropped.
    assert w.cpu.tolist() == [4000, 2000, 8000]
    assert w.milli.tolist() == [1000, 500, 0]
    assert w.count.tolist() == [1, 1, 0]
    assert w.p.tolist() == pytest.approx([50 / 95, 30 / 95, 15 / 95])
    assert w.p.sum() == pytest.approx(1.0)


def test_typical_workload_keeps_the_type_that_crosses_the_cut() -> None:
    a = Request("a", cpu_milli=1000)
    b = Request("b", cpu_milli=1000, num_gpu=1, gpu_milli=500)
    # The model constraint makes a distinct type even with the same sizes.
    c = Request("c", cpu_milli=1000, num_gpu=1, gpu_milli=500, gpu_models=frozenset({"T4"}))
    d = Request("d", cpu_milli=3000)
    pods = requests(a, 60) + requests(b, 30) + requests(c, 6) + requests(d, 4)
    w = TypicalWorkload.from_requests(pods)  # 60, 90, 96 ≥ 95
    assert w.models == (frozenset(), frozenset(), frozenset({"T4"}))
    assert w.p.tolist() == pytest.approx([60 / 96, 30 / 96, 6 / 96])


def test_typical_workload_needs_a_task() -> None:
    with pytest.raises(ValueError, match="at least one task"):
        TypicalWorkload.from_requests([])


# --- fragment_after (FGD's vectorised "after") agrees with really placing the request ------------

fleet_gpus = st.lists(st.sampled_from([0, 150, 300, 500, 700, 1000]), min_size=1, max_size=8)
request_shapes = st.one_of(
    st.builds(lambda c: Request("r", cpu_milli=c), st.integers(0, 8).map(lambda x: x * 1000)),
    st.builds(
        lambda c, m: Request("r", cpu_milli=c, num_gpu=1, gpu_milli=m),
        st.integers(0, 8).map(lambda x: x * 1000),
        st.integers(1, 999),
    ),
    st.builds(
        lambda c, k: Request("r", cpu_milli=c, num_gpu=k, gpu_milli=1000),
        st.integers(0, 8).map(lambda x: x * 1000),
        st.sampled_from([1, 2, 4]),
    ),
)
MIXED = workload(
    (2000, 300, 1, ANY, 0.2),
    (4000, 650, 1, ANY, 0.2),
    (4000, 1000, 1, frozenset({"A100"}), 0.2),
    (8000, 1000, 2, ANY, 0.2),
    (1000, 0, 0, ANY, 0.2),
)


@settings(max_examples=150, deadline=None)
@given(gpus=fleet_gpus, cpu=st.integers(0, 12).map(lambda x: x * 1000), req=request_shapes)
def test_fragment_after_matches_a_real_placement(gpus: list[int], cpu: int, req: Request) -> None:
    state = one_node(gpus, cpu)
    meter = FragMeter(state, MIXED)
    if req.cpu_milli > cpu:
        return
    if req.kind is Kind.SHARE:
        if not any(g >= req.gpu_milli for g in gpus):
            return
        chosen: tuple[int, ...] = (
            share_gpu(state, 0, req.gpu_milli, "best", np.random.default_rng()),
        )
        old = np.array([state.gpu_free[0, chosen[0]]])
    elif req.kind is Kind.GPUS:
        if sum(g == 1000 for g in gpus) < req.num_gpu:
            return
        chosen, old = whole_gpus(state, 0, req.num_gpu), None
    else:
        chosen, old = (), None
    predicted = fragment_after(meter, req, np.array([0]), old)
    state.assume(Placement("r", (Binding(0, chosen, req.gpu_milli, req.cpu_milli, 0),)))
    meter.refresh()
    assert predicted[0] == pytest.approx(meter.frag[0])
