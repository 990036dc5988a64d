"""`scheduler.report`: seed ranges, mean and sample sd over seeds, the published summary."""

from __future__ import annotations

import math
import statistics

import pytest

from cardhour.scheduler.replay.report import (
    MAX_SEEDS,
    Published,
    compare,
    distance,
    format_seeds,
    parse_published,
    parse_seeds,
    published_for,
    reference_policy,
    run_record,
    summarise,
)
from cardhour.scheduler.replay.run import ReplayResult
from cardhour.scheduler.replay.trace import TraceError


@pytest.mark.parametrize(
    ("text", "seeds"),
    [
        ("42-51", list(range(42, 52))),
        ("42", [42]),
        ("42,45", [42, 45]),
        (" 45 , 42-43,42 ", [42, 43, 45]),
        ("0-0", [0]),
    ],
)
def test_parse_seeds(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "expected e.g. 42-51"),
        ("42,", "expected e.g. 42-51"),
        ("51-42", "goes down"),
        ("x", "is not a seed"),
        ("4-x", "is not a seed"),
        ("1-2-3", "is not a seed"),
        ("-3", "is not a seed"),
        (f"0-{MAX_SEEDS}", "more than"),
    ],
)
def test_parse_seeds_errors_name_the_problem(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_seeds(text)


def test_format_seeds_inverts_parse_seeds() -> None:
    assert format_seeds([50, 42, 43, 44, 46]) == "42-44,46,50"
    assert parse_seeds(format_seeds([50, 42, 43, 44, 46])) == [42, 43, 44, 46, 50]


def result(seed: int, unalloc: dict[str, float], failed: int) -> ReplayResult:
    return ReplayResult(
        policy="fgd",
        seed=seed,
        pods=100,
        failed_pods=failed,
        unallocated_gpu_pct=unalloc,
        frag_pct_of_total={"100": 1.0},
        frag_rate_pct={"100": 50.0},
        wall_seconds=2.0,
        curve={"unallocated_gpu_pct": [1.0] * 131},
    )


def test_run_record_drops_the_curves_and_keeps_the_numbers() -> None:
    record = run_record(result(42, {"100": 4.5}, 3))
    assert "curve" not in record and "policy" not in record
    assert record["seed"] == 42 and record["failed_pods"] == 3
    assert record["unallocated_gpu_pct"] == {"100": 4.5}


def test_summarise_mean_and_sample_sd() -> None:
    runs = [
        run_record(result(1, {"100": 4.0, "110": 3.0}, 2)),
        run_record(result(2, {"100": 5.0}, 4)),
        run_record(result(3, {"100": 6.0, "110": 5.0}, 6)),
    ]
    s = summarise(runs)
    assert s.n == 3
    assert s.mean["unallocated_gpu_pct"]["100"] == pytest.approx(5.0)
    assert s.sd["unallocated_gpu_pct"]["100"] == pytest.approx(1.0)  # sample sd, not population
    assert s.mean["unallocated_gpu_pct"]["110"] == pytest.approx(4.0)  # over the runs having it
    assert s.sd["unallocated_gpu_pct"]["110"] == pytest.approx(statistics.stdev([3.0, 5.0]))
    assert s.mean["failed_pods"] == pytest.approx(4.0)
    assert s.sd["failed_pods"] == pytest.approx(2.0)
    assert list(s.mean["unallocated_gpu_pct"]) == ["100", "110"]


def test_summarise_one_seed_has_zero_sd_and_none_is_an_error() -> None:
    s = summarise([run_record(result(1, {"100": 4.0}, 2))])
    assert s.sd["unallocated_gpu_pct"]["100"] == 0.0
    assert s.sd["wall_seconds"] == 0.0
    with pytest.raises(ValueError):
        summarise([])


SUMMARY = """workload,sc_policy,arrived_pct,metric,mean,sd,median,n_seeds
openb_pod_list_default,06-FGD,100,unalloc_gpu_pct,4.773,0.106,4.770,10
openb_pod_list_default,06-FGD,100.0,frag_amount_pct_of_total_gpu,4.729,0.112,4.735,10
openb_pod_list_default,06-FGD,95,unalloc_gpu_pct,5.095,0.063,,10
openb_pod_list_default,05-BestFit,100,unalloc_gpu_pct,7.14,0.14,7.1,10
openb_pod_list_cpu050,06-FGD,100,unalloc_gpu_pct,5.0,0.11,5.0,10
"""


def test_parse_published_and_pick_one_trace_and_policy() -> None:
    table = parse_published(SUMMARY)
    assert table[("openb_pod_list_default", "06-FGD", "unalloc_gpu_pct", "100")] == Published(
        4.773, 0.106, 4.770, 10
    )
    cells = published_for(table, "openb_pod_list_default", "06-FGD")
    assert set(cells) == {"unallocated_gpu_pct", "frag_pct_of_total"}
    assert list(cells["unallocated_gpu_pct"]) == ["95", "100"]  # sorted numerically
    assert math.isnan(cells["unallocated_gpu_pct"]["95"].median)
    assert cells["frag_pct_of_total"]["100"].mean == 4.729  # "100.0" normalised to "100"
    assert published_for(table, "openb_pod_list_cpu0", "06-FGD") == {}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("workload,sc_policy\n", "lacks columns"),
        (SUMMARY.replace("4.773", "n/a"), "line 2: mean must be a number"),
        (SUMMARY.replace("0.063", "inf"), "line 4: sd must be finite"),
    ],
)
def test_parse_published_errors_are_trace_errors(text: str, fragment: str) -> None:
    with pytest.raises(TraceError, match=fragment):
        parse_published(text)


def test_reference_policy_maps_baselines_and_the_default_to_fgd() -> None:
    assert reference_policy("bestfit", "fgd") == "05-BestFit"
    assert reference_policy("random", "fgd") == "01-Random"
    assert reference_policy("ours", "ours") == "06-FGD"
    assert reference_policy("other", "ours") is None


def test_compare_diff_and_distance_in_published_sd() -> None:
    s = summarise([run_record(result(1, {"100": 5.0, "90": 10.0}, 0))])
    published = published_for(parse_published(SUMMARY), "openb_pod_list_default", "06-FGD")
    rows = compare(s, published)
    cell = rows["unallocated_gpu_pct"]["100"]
    assert cell["diff"] == pytest.approx(5.0 - 4.773)
    assert cell["distance_sd"] == pytest.approx((5.0 - 4.773) / 0.106)
    assert set(rows["unallocated_gpu_pct"]) == {"100"}  # 95 is not ours, 90 is not theirs
    assert rows["frag_rate_pct"] == {}
    assert distance(1.0, Published(1.0, 0.0, 1.0, 1)) is None
