"""`bench/scheduler.py`'s pure rendering on a fake report (the real matrix never runs here)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    sys.path.insert(0, str(BENCH))  # the bench imports its sibling modules
    try:
        spec = importlib.util.spec_from_file_location("bench_scheduler", BENCH / "scheduler.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


def fake_report(**changes: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "command": "make bench-scheduler BENCH_ARGS=--quick",
        "machine": {
            "nproc": 2,
            "cpu_model": "Test CPU",
            "python": "3.11.7",
            "numpy": "2.0",
            "load_average": 0.5,
        },
        "date": "2025-01-01 00:00 UTC",
        "commit": "abc1234",
        "fingerprint": "f" * 16,
        "seeds": [42, 43],
        "tune": 1.3,
        "default_policy": "fgd",
        "elapsed_s": 12.0,
        "matrix": [
            {
                "trace": "openb_pod_list_default",
                "policy": "bestfit",
                "n": 2,
                "mean": 7.0,
                "sd": 0.2,
                "published": {"policy": "05-BestFit", "mean": 7.14, "sd": 0.14},
                "distance_sd": -1.0,
            },
            {
                "trace": "openb_pod_list_default",
                "policy": "fgd",
                "n": 2,
                "mean": 4.7,
                "sd": 0.02,
                "published": {"policy": "06-FGD", "mean": 4.77, "sd": 0.11},
                "distance_sd": -0.64,
            },
            {
                "trace": "openb_pod_list_cpu0",
                "policy": "fgd",
                "n": 2,
                "mean": 5.5,
                "sd": 0.1,
                "published": None,
                "distance_sd": None,
            },
        ],
        "latency": [
            {
                "policy": "bestfit",
                "samples": 300,
                "p50_s": 1e-4,
                "p99_s": 2e-4,
                "pods_bound": 1,
                "gpu_allocated_pct": 50.0,
            },
            {
                "policy": "fgd",
                "samples": 300,
                "p50_s": 2e-4,
                "p99_s": 5e-4,
                "pods_bound": 1,
                "gpu_allocated_pct": 49.9,
            },
        ],
        "gang": [
            {
                "occupancy": "mixed",
                "nodes": 10000,
                "free_nodes": 6753,
                "whole_free_leaves": 73,
                "placed": True,
                "leaves_used": 4,
                "spines_used": 1,
                "min_leaves": 4,
                "min_leaves_one_spine": 4,
                "p50_s": 0.002,
                "max_s": 0.01,
                "repeats": 10,
            },
        ],
        "memory": {
            "nodes": 10000,
            "gpus": 80000,
            "nbytes": 1_900_000,
            "retained_bytes": 2_465_220,
            "peak_bytes": 2_466_612,
        },
        "one_core": {"policy": "fgd", "seed": 42, "wall_seconds": 3.5, "cpus": [0]},
    }
    report.update(changes)
    return report


def test_markdown_has_a_table_per_trace_with_published_and_distance(bench: ModuleType) -> None:
    md = bench.render_markdown(fake_report())
    assert "### openb_pod_list_default" in md and "### openb_pod_list_cpu0" in md
    assert "| bestfit | 7.00 ± 0.20 | 2 | 7.14 ± 0.14 (05-BestFit) | -1.0 |" in md
    assert "| fgd (default) | 4.70 ± 0.02 | 2 | 4.77 ± 0.11 (06-FGD) | -0.6 |" in md
    assert "| fgd (default) | 5.50 ± 0.10 | 2 | - | - |" in md  # nothing published for cpu0
    assert "`make bench-scheduler BENCH_ARGS=--quick`" in md
    assert "2 CPUs (nproc), Test CPU" in md and "2025-01-01" in md
    assert md.rstrip().endswith(bench.NOTES_MARKER)
    keys = {"bestfit": "a" * 16, "fgd": "b" * 16}
    md = bench.render_markdown(fake_report(fingerprints=keys))
    assert f"fingerprint `{'f' * 16}` (per policy: bestfit `{'a' * 16}`, fgd `{'b' * 16}`)" in md


def test_targets_pass_and_fail(bench: ModuleType) -> None:
    rows = {row[0]: row for row in bench.targets(fake_report())}
    assert all(row[-1] == "pass" for row in rows.values())
    slow = fake_report(one_core={"policy": "fgd", "seed": 42, "wall_seconds": 5.2, "cpus": [0]})
    gang = dict(fake_report()["gang"][0], leaves_used=5)
    bad = {row[0]: row[-1] for row in bench.targets(dict(slow, gang=[gang]))}
    assert list(bad.values()).count("FAIL") == 2
    md = bench.render_markdown(dict(slow, gang=[gang]))
    assert "| 5.20 s | ≤ 5 s | FAIL |" in md
    assert "| 5 (minimum 4), 10.0 ms | the minimum, ≤ 50 ms | FAIL |" in md
    # a slow gang fails on time alone; the default policy's latency is a target at every fill
    late = dict(fake_report()["gang"][0], max_s=0.06)
    near_full = {**fake_report()["latency"][1], "fill_pct": 90, "p50_s": 1e-3, "p99_s": 3e-3}
    report = fake_report(gang=[late])
    report["latency"].append(near_full)
    rows = {row[0]: row for row in bench.targets(report)}
    assert rows["one 1-GPU container placed by fgd at 50% arrived: p99"][1:] == [
        "0.50 ms",
        "≤ 2 ms",
        "pass",
    ]
    assert rows["one 1-GPU container placed by fgd at 90% arrived: p99"][1:] == [
        "3.00 ms",
        "≤ 2 ms",
        "FAIL",
    ]
    assert [r[-1] for name, r in rows.items() if name.startswith("128-node gang")] == ["FAIL"]


def test_latency_ratios_are_against_fgd(bench: ModuleType) -> None:
    rows = bench.latency_rows(fake_report())
    assert rows[0] == ["bestfit", "1 GPU", "50", "0.10", "0.20", "0.50 / 0.40", "50.0"]
    assert rows[1][5] == "1.00 / 1.00"
    near_full = dict(policy="cardhour", fill_pct=90, p50_s=4e-3, p99_s=1e-2)
    report = fake_report()
    report["latency"].append({**near_full, "gpu_allocated_pct": 89.0})
    assert bench.latency_rows(report)[2][:6] == ["cardhour", "1 GPU", "90", "4.00", "10.00", "-"]
    # a share is set against fgd's share, and is no target row (target 4 is a whole GPU)
    share = dict(container="0.5 GPU", fill_pct=50, gpu_allocated_pct=50.0)
    report["latency"] += [
        {**share, "policy": "fgd", "p50_s": 1e-4, "p99_s": 2e-4},
        {**share, "policy": "cardhour", "p50_s": 4e-3, "p99_s": 6e-3},
    ]
    assert bench.latency_rows(report)[4][:6] == [
        "cardhour", "0.5 GPU", "50", "4.00", "6.00", "40.00 / 30.00",
    ]  # fmt: skip
    targets = [row[0] for row in bench.targets(dict(report, default_policy="cardhour"))]
    assert [t for t in targets if "container placed" in t] == [
        "one 1-GPU container placed by cardhour at 90% arrived: p99"
    ]


def test_console_tables_are_aligned(bench: ModuleType) -> None:
    text = bench.render_console(fake_report())
    assert "seeds 42-43" in text
    table = bench.text_table(["a", "bbb"], [["xxxx", "y"], ["z", "w"]]).splitlines()
    assert table == ["a     bbb", "xxxx  y", "z     w"]


def test_notes_below_the_marker_are_kept(bench: ModuleType) -> None:
    generated = bench.render_markdown(fake_report())
    first = bench.keep_notes(generated, None)
    assert first.endswith(bench.NOTES_DEFAULT)
    edited = first.replace("(Nothing recorded yet.)", "Tried a GPU-weighted M: worse by 0.3.")
    again = bench.keep_notes(
        bench.render_markdown(fake_report(date="2025-02-02 00:00 UTC")), edited
    )
    assert "Tried a GPU-weighted M: worse by 0.3." in again
    assert "2025-02-02" in again and "2025-01-01" not in again
    assert again.count(bench.NOTES_MARKER) == 1
    # A hand-written file without the marker keeps its notes section from the heading on.
    hand = "# old\nstale numbers\n\n## Our policy: what we tried\n\nidea A\n"
    kept = bench.keep_notes(generated, hand)
    assert kept.endswith("## Our policy: what we tried\n\nidea A\n")
    assert "stale numbers" not in kept


def cell(trace: str, policy: str, mean: float, published: float | None = None) -> dict[str, Any]:
    pub = {"policy": "06-FGD", "mean": published, "sd": 0.11} if published else None
    return {
        "trace": f"openb_pod_list_{trace}",
        "policy": policy,
        "n": 10,
        "mean": mean,
        "sd": 0.1,
        "published": pub,
        "distance_sd": None,
        "vs_fgd": {"mean": -0.2, "sd": 0.05, "lower": 10, "n": 10} if policy != "fgd" else None,
    }


def test_target_two_compares_the_default_policy_with_fgd_on_every_trace(
    bench: ModuleType,
) -> None:
    matrix = [
        cell("default", "fgd", 4.75, published=4.77),
        cell("default", "cardhour", 4.57, published=4.77),
        cell("cpu0", "fgd", 5.02),  # no published number: our fgd is the reference
        cell("cpu0", "cardhour", 4.95),
    ]
    report = fake_report(default_policy="cardhour", matrix=matrix)
    rows = bench.against_fgd(report)
    assert rows[0][1:] == ["1/2 traces; worst cpu0 -0.07", "< -0.11 on all", "FAIL"]
    assert rows[1][1:] == ["4.57 ± 0.10", "≤ 4", "FAIL"]
    matrix[3] = cell("cpu0", "cardhour", 4.80)
    assert bench.against_fgd(report)[0][-1] == "pass"
    assert bench.matrix_rows(report)["openb_pod_list_default"][1][-1] == (
        "-0.20 ± 0.05 (10/10 seeds lower)"
    )
    assert bench.against_fgd(fake_report()) == []  # the default policy is fgd itself


def test_paired_differences_are_per_seed(bench: ModuleType) -> None:
    paired = sys.modules["scheduler_matrix"].paired
    runs = [{"unallocated_gpu_pct": {"100": v}} for v in (4.5, 4.7, 4.9)]
    fgd = [{"unallocated_gpu_pct": {"100": v}} for v in (4.7, 4.8, 4.8)]
    out = paired(runs, fgd)
    assert out["lower"] == 2 and out["n"] == 3
    assert out["mean"] == pytest.approx(-0.0667, abs=1e-3)


def test_a_lookahead_change_reruns_only_the_policies_with_a_lookahead(
    bench: ModuleType, tmp_path: Path
) -> None:
    """The matrix cache's fingerprints: an edit to a lookahead module changes the `cardhour`
    policy's (it has a lookahead) and no baseline's; an edit to any other engine module changes
    all."""
    matrix = sys.modules["scheduler_matrix"]
    package = tmp_path / "scheduler"
    shutil.copytree(matrix.PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,num_gpu,model\n")
    policies = ("fgd", "bestfit", "cardhour")

    def keys() -> dict[str, str]:
        return {p: matrix.fingerprint(nodes, 1.3, p, package) for p in policies}

    before = keys()
    assert len(set(before.values())) == 3
    after = before
    for module in matrix.LOOKAHEAD:
        with (package / module).open("a") as f:
            f.write("\n# an edit\n")
        edited = keys()
        assert edited["cardhour"] != after["cardhour"], module
        assert (edited["fgd"], edited["bestfit"]) == (before["fgd"], before["bestfit"])
        after = edited
    with (package / "fgd_table.py").open("a") as f:
        f.write("\n# an edit\n")
    assert all(a != b for a, b in zip(keys().values(), after.values(), strict=True))
    assert matrix.combined(after) != matrix.combined(before)
