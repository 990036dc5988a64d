"""Summaries of trace replays, shared by `cardhour simulate` and `bench/scheduler.py`. Pure.

- `parse_seeds` reads "42-51", "42" or "42,45" (and mixes such as "42-44,50").
- `run_record` turns a `ReplayResult` into a JSON-ready dict without the full curves;
  `summarise` averages such records over seeds (mean and *sample* sd; sd is 0 for one seed).
- `parse_published` reads the FGD authors' `summary_by_arrival.csv` from text; `published_for`
  picks one trace and policy out of it, keyed like our results, and `compare` sets ours beside it.
Metric keys are ours (`METRICS`); arrived % keys are strings, as in `ReplayResult`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cardhour.scheduler.replay.run import ReplayResult
from cardhour.scheduler.replay.trace import TraceError, read_rows

METRICS = ("unallocated_gpu_pct", "frag_pct_of_total", "frag_rate_pct")
COUNTS = ("pods", "failed_pods", "wall_seconds", "bare_metal_requested", "bare_metal_satisfied")
MAX_SEEDS = 10_000

#: Our baseline names → the authors' `sc_policy` values.
PUBLISHED_POLICY = {
    "random": "01-Random",
    "dotprod": "02-DotProd",
    "clustering": "03-GpuClustering",
    "packing": "04-GpuPacking",
    "bestfit": "05-BestFit",
    "fgd": "06-FGD",
}
#: Our metric names → the authors' `metric` values.
PUBLISHED_METRIC = {
    "unallocated_gpu_pct": "unalloc_gpu_pct",
    "frag_pct_of_total": "frag_amount_pct_of_total_gpu",
    "frag_rate_pct": "frag_ratio_pct_of_idle_gpu",
}
PUBLISHED_COLUMNS = ("workload", "sc_policy", "arrived_pct", "metric", "mean", "sd", "n_seeds")

Metrics = dict[str, dict[str, float]]  # metric → arrived % → value


def parse_seeds(text: str) -> list[int]:
    """Seeds from "42-51", "42" or "42,45" (parts may mix); sorted, without repeats.

    Raises ValueError naming the bad part: not an integer, negative, a descending range, or more
    than `MAX_SEEDS` seeds.
    """
    seeds: set[int] = set()
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise ValueError(f"seeds {text!r}: expected e.g. 42-51, 42 or 42,45")
    for part in parts:
        low, sep, high = part.partition("-")
        try:
            first = int(low)
            last = int(high) if sep else first
        except ValueError:
            raise ValueError(f"seeds {text!r}: {part!r} is not a seed or a range A-B") from None
        if first < 0:
            raise ValueError(f"seeds {text!r}: seeds must not be negative")
        if last < first:
            raise ValueError(f"seeds {text!r}: range {part!r} goes down")
        if last - first + 1 + len(seeds) > MAX_SEEDS:
            raise ValueError(f"seeds {text!r}: more than {MAX_SEEDS} seeds")
        seeds.update(range(first, last + 1))
    return sorted(seeds)


def format_seeds(seeds: Sequence[int]) -> str:
    """The inverse of `parse_seeds` for display: [42, 43, 44, 50] → "42-44,50"."""
    parts: list[str] = []
    ordered = sorted(set(seeds))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def run_record(result: ReplayResult) -> dict[str, Any]:
    """One seed's numbers as a JSON-ready dict (no curves)."""
    return {
        "seed": result.seed,
        "pods": result.pods,
        "failed_pods": result.failed_pods,
        **{metric: dict(getattr(result, metric)) for metric in METRICS},
        "wall_seconds": result.wall_seconds,
        "bare_metal_requested": result.bare_metal_requested,
        "bare_metal_satisfied": result.bare_metal_satisfied,
    }


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    mean = statistics.fmean(values)
    return mean, statistics.stdev(values) if len(values) > 1 else 0.0


@dataclass(frozen=True)
class Summary:
    """Mean and sample sd over seeds: `mean[metric][arrived]`, and `mean[count]` for `COUNTS`.

    An arrived % that some runs lack is averaged over the runs that have it.
    """

    n: int
    mean: dict[str, Any]
    sd: dict[str, Any]


def summarise(runs: Sequence[Mapping[str, Any]]) -> Summary:
    """Aggregate `run_record` dicts; ValueError if there are none."""
    if not runs:
        raise ValueError("nothing to summarise: no runs")
    mean: dict[str, Any] = {}
    sd: dict[str, Any] = {}
    for metric in METRICS:
        keys = sorted({k for run in runs for k in run[metric]}, key=float)
        pairs = {k: _mean_sd([run[metric][k] for run in runs if k in run[metric]]) for k in keys}
        mean[metric] = {k: m for k, (m, _) in pairs.items()}
        sd[metric] = {k: s for k, (_, s) in pairs.items()}
    for count in COUNTS:
        mean[count], sd[count] = _mean_sd([float(run[count]) for run in runs])
    return Summary(len(runs), mean, sd)


@dataclass(frozen=True)
class Published:
    """One published cell: mean, sd and median over `n_seeds` seeds."""

    mean: float
    sd: float
    median: float
    n_seeds: int


PublishedTable = dict[tuple[str, str, str, str], Published]  # (workload, policy, metric, x)


def _number(row: dict[str, str], key: str, line: int) -> float:
    try:
        value = float(row[key])
    except (TypeError, ValueError):
        raise TraceError(f"line {line}: {key} must be a number, got {row[key]!r}") from None
    if not math.isfinite(value):
        raise TraceError(f"line {line}: {key} must be finite")
    return value


def parse_published(text: str) -> PublishedTable:
    """The authors' summary_by_arrival.csv; TraceError (naming the line) if it does not parse.

    Keys use the authors' workload, policy and metric names; the arrived % is normalised to an
    integer string ("100.0" → "100"). `median` is optional (NaN when absent).
    """
    table: PublishedTable = {}
    for line, row in read_rows(text, PUBLISHED_COLUMNS, "published summary"):
        arrived = _number(row, "arrived_pct", line)
        cell = Published(
            mean=_number(row, "mean", line),
            sd=_number(row, "sd", line),
            median=_number(row, "median", line) if row.get("median") else math.nan,
            n_seeds=int(_number(row, "n_seeds", line)),
        )
        key = (row["workload"], row["sc_policy"], row["metric"], f"{arrived:g}")
        table[key] = cell
    return table


def reference_policy(policy: str, default_policy: str) -> str | None:
    """The authors' policy to compare `policy` with: its own baseline, FGD for our default
    policy when it is not a baseline, else None."""
    if policy in PUBLISHED_POLICY:
        return PUBLISHED_POLICY[policy]
    return PUBLISHED_POLICY["fgd"] if policy == default_policy else None


def published_for(table: PublishedTable, workload: str, sc_policy: str) -> dict[str, Any]:
    """`{metric: {arrived: Published}}` in our metric names, for one workload and policy.

    Empty when the table has nothing for them.
    """
    out: dict[str, Any] = {}
    for metric, theirs in PUBLISHED_METRIC.items():
        cells = {
            x: cell
            for (w, p, m, x), cell in table.items()
            if w == workload and p == sc_policy and m == theirs
        }
        if cells:
            out[metric] = dict(sorted(cells.items(), key=lambda kv: float(kv[0])))
    return out


def distance(ours: float, published: Published) -> float | None:
    """(ours − published mean) in published sd; None when the published sd is 0."""
    return (ours - published.mean) / published.sd if published.sd > 0 else None


def compare(summary: Summary, published: Mapping[str, Any]) -> dict[str, Any]:
    """Ours beside theirs at every arrived % both have:
    `{metric: {arrived: {mean, sd, median, n_seeds, diff, distance_sd}}}` where `diff` is our
    mean minus theirs and `distance_sd` is `diff` in their sd (None if their sd is 0)."""
    out: dict[str, Any] = {}
    for metric in METRICS:
        ours = summary.mean.get(metric, {})
        cells = published.get(metric, {})
        rows: dict[str, Any] = {}
        for x, cell in cells.items():
            if x not in ours:
                continue
            rows[x] = {
                "mean": cell.mean,
                "sd": cell.sd,
                "median": None if math.isnan(cell.median) else cell.median,
                "n_seeds": cell.n_seeds,
                "diff": ours[x] - cell.mean,
                "distance_sd": distance(ours[x], cell),
            }
        out[metric] = rows
    return out
