"""`cardhour simulate` on a tiny synthetic openb-format trace (6 nodes, 40 pods) in tmp_path.

In-process through Typer's CliRunner, so each replay takes milliseconds; one test runs two
spawned worker processes (`--jobs 2`) and checks they agree with the in-process run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cardhour.cli.main import app
from cardhour.scheduler import profiles
from cardhour.scheduler.replay.report import COUNTS, METRICS

NODES = """sn,cpu_milli,memory_mib,gpu,model
n-0,96000,393216,8,G2
n-1,96000,393216,8,G2
n-2,104000,524288,2,T4
n-3,104000,524288,2,T4
n-4,96000,786432,8,V100M32
n-5,32000,131072,4,V100M16
"""
ARRIVED = ("90", "95", "100", "110", "120", "130")
PUBLISHED_METRICS = (
    "unalloc_gpu_pct",
    "frag_amount_pct_of_total_gpu",
    "frag_ratio_pct_of_idle_gpu",
)
RUN_KEYS = {"seed", "pods", *METRICS, *COUNTS}


def pods_csv() -> str:
    """40 pods: CPU-only, GPU-sharing, 1-, 2- and 4-GPU; the last column is ignored."""
    shapes = [
        (4000, 8192, 0, 0),
        (6000, 12288, 1, 460),
        (8000, 16384, 1, 1000),
        (12000, 32768, 2, 1000),
        (2000, 4096, 1, 230),
        (16000, 65536, 4, 1000),
        (4000, 8192, 1, 810),
        (6000, 16384, 1, 1000),
    ]
    lines = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos"]
    for i in range(40):
        cpu, mem, gpus, milli = shapes[i % len(shapes)]
        lines.append(f"pod-{i:04d},{cpu},{mem},{gpus},{milli},,LS")
    return "\n".join(lines) + "\n"


def summary_csv(workload: str) -> str:
    lines = ["workload,sc_policy,arrived_pct,metric,mean,sd,median,n_seeds"]
    for policy, base in (("06-FGD", 5.0), ("05-BestFit", 7.0)):
        for x in ARRIVED:
            for metric in PUBLISHED_METRICS:
                lines.append(f"{workload},{policy},{x},{metric},{base},0.5,{base},10")
    return "\n".join(lines) + "\n"


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(NODES)
    path = tmp_path / "openb_pod_list_tiny.csv"
    path.write_text(pods_csv())
    published = tmp_path / "fgd_expected_results"
    published.mkdir()
    (published / "summary_by_arrival.csv").write_text(summary_csv(path.stem))
    return path


def simulate(*args: str) -> Any:
    return CliRunner().invoke(app, ["simulate", *args])


def as_json(result: Any) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    payload: dict[str, Any] = json.loads(result.stdout)
    return payload


def test_json_has_one_run_per_seed_and_mean_sd_over_them(trace: Path) -> None:
    result = simulate("--trace", str(trace), "--policy", "bestfit", "--seeds", "1-3", "--json")
    payload = as_json(result)
    assert {"trace", "policy", "tune", "seeds", "runs", "mean", "sd"} <= set(payload)
    assert "published" not in payload
    assert payload["policy"] == "bestfit"
    assert payload["tune"] == 1.3
    assert payload["seeds"] == [1, 2, 3]
    assert [run["seed"] for run in payload["runs"]] == [1, 2, 3]
    for run in payload["runs"]:
        assert set(run) == RUN_KEYS
        assert set(run["unallocated_gpu_pct"]) <= set(ARRIVED)
        assert 0 < run["failed_pods"] < run["pods"] <= 40  # tuned down to 1.3 × capacity
    for metric in METRICS:
        for x, mean in payload["mean"][metric].items():
            values = [r[metric][x] for r in payload["runs"] if x in r[metric]]
            assert mean == pytest.approx(sum(values) / len(values))
            assert payload["sd"][metric][x] >= 0
    assert set(COUNTS) <= set(payload["mean"])
    progress = [line for line in result.stderr.splitlines() if line.startswith("seed ")]
    assert len(progress) == 3
    assert "(3/3)" in progress[-1]


def test_defaults_to_the_default_policy_and_one_seed_has_zero_sd(trace: Path) -> None:
    payload = as_json(simulate("--trace", str(trace), "--seeds", "42", "--json"))
    assert payload["policy"] == profiles.DEFAULT_POLICY
    assert payload["seeds"] == [42]
    assert all(v == 0 for metric in METRICS for v in payload["sd"][metric].values())
    assert payload["sd"]["failed_pods"] == 0


def test_seed_list_and_parallel_jobs_give_the_same_numbers(trace: Path) -> None:
    common = ["--trace", str(trace), "--policy", "fgd", "--seeds", "7,9", "--json"]
    serial = as_json(simulate(*common))
    parallel = as_json(simulate(*common, "--jobs", "2"))
    assert serial["seeds"] == [7, 9]

    def strip(p: dict[str, Any]) -> list[dict[str, Any]]:
        return [{k: v for k, v in run.items() if k != "wall_seconds"} for run in p["runs"]]

    assert strip(parallel) == strip(serial)


def test_compare_adds_the_published_numbers_and_the_difference(trace: Path) -> None:
    payload = as_json(
        simulate("--trace", str(trace), "--policy", "fgd", "--seeds", "1-2", "--json", "--compare")
    )
    published = payload["published"]
    assert published["policy"] == "06-FGD"
    assert published["workload"] == "openb_pod_list_tiny"
    cells = published["metrics"]["unallocated_gpu_pct"]
    assert cells, "no arrived % in common"
    for x, cell in cells.items():
        assert cell["mean"] == 5.0 and cell["sd"] == 0.5 and cell["n_seeds"] == 10
        ours = payload["mean"]["unallocated_gpu_pct"][x]
        assert cell["diff"] == pytest.approx(ours - 5.0)
        assert cell["distance_sd"] == pytest.approx((ours - 5.0) / 0.5)


def test_tables_show_mean_sd_and_with_compare_the_published_column(trace: Path) -> None:
    plain = simulate("--trace", str(trace), "--policy", "bestfit", "--seeds", "1-2")
    assert plain.exit_code == 0, plain.output
    assert "ARRIVED %" in plain.stdout and "±" in plain.stdout
    assert "openb_pod_list_tiny · policy bestfit · seeds 1-2 (2)" in plain.stdout
    compared = simulate("--trace", str(trace), "--policy", "bestfit", "--seeds", "1", "--compare")
    assert compared.exit_code == 0, compared.output
    assert "PUBLISHED" in compared.stdout and "05-BestFit" in compared.stdout
    assert "7.00 ± 0.50" in compared.stdout


def test_bare_metal_share_requests_whole_nodes(trace: Path) -> None:
    payload = as_json(
        simulate("--trace", str(trace), "--seeds", "1", "--bare-metal", "0.3", "--json")
    )
    run = payload["runs"][0]
    assert run["bare_metal_requested"] > 0
    assert 0 <= run["bare_metal_satisfied"] <= run["bare_metal_requested"]


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("case", "fragment"),
    [
        ("missing trace", "does not exist"),
        ("missing nodes", "node list"),
        ("bad seeds", "goes down"),
        ("word seeds", "not a seed"),
        ("unknown policy", "unknown policy 'nope'"),
        ("malformed pods", "line 3: cpu_milli must be an integer"),
        ("malformed nodes", "lacks columns"),
        ("no summary", "published summary"),
        ("trace not published", "has no numbers for openb_pod_list_other"),
        ("bad tune", "--tune must be in (0, 10]"),
        ("infinite tune", "--tune must be in (0, 10]"),
        ("bare metal too high", "--bare-metal must be in [0, 0.9]"),
        ("duplicate node", "appears more than once"),
        ("bad jobs", "--jobs must be at least 1"),
    ],
)
def test_bad_input_exits_2_with_one_line(trace: Path, case: str, fragment: str) -> None:
    d = trace.parent
    args = {
        "missing trace": ["--trace", str(d / "nope.csv")],
        "missing nodes": ["--trace", str(trace), "--nodes", str(d / "none.csv")],
        "bad seeds": ["--trace", str(trace), "--seeds", "51-42"],
        "word seeds": ["--trace", str(trace), "--seeds", "a-b"],
        "unknown policy": ["--trace", str(trace), "--policy", "nope"],
        "malformed pods": [
            "--trace",
            str(_write(d / "bad.csv", pods_csv().replace("pod-0001,6000", "pod-0001,abc"))),
        ],
        "malformed nodes": [
            "--trace",
            str(trace),
            "--nodes",
            str(_write(d / "nodes.csv", "name,cpu\nx,1\n")),
        ],
        "no summary": ["--trace", str(trace), "--compare"],
        "trace not published": [
            "--trace",
            str(_write(d / "openb_pod_list_other.csv", pods_csv())),
            "--compare",
        ],
        "bad tune": ["--trace", str(trace), "--tune", "0"],
        "infinite tune": ["--trace", str(trace), "--tune", "inf"],
        "bare metal too high": ["--trace", str(trace), "--bare-metal", "0.999"],
        "duplicate node": [
            "--trace",
            str(trace),
            "--nodes",
            str(
                _write(d / "dup.csv", "sn,cpu_milli,memory_mib,gpu,model\nn,1,1,1,T4\nn,1,1,1,T4\n")
            ),
        ],
        "bad jobs": ["--trace", str(trace), "--jobs", "0"],
    }[case]
    if case == "no summary":
        (d / "fgd_expected_results" / "summary_by_arrival.csv").unlink()
    result = simulate(*args, "--seeds", "1") if "--seeds" not in args else simulate(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert fragment in lines[0]
    assert "Traceback" not in result.output
    assert result.stdout == ""


def test_missing_node_file_next_to_the_trace_is_named(tmp_path: Path) -> None:
    trace = _write(tmp_path / "openb_pod_list_x.csv", pods_csv())
    result = simulate("--trace", str(trace), "--seeds", "1")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: not_found: node list {tmp_path / 'openb_node_list_gpu_node.csv'} does not exist"
    )
