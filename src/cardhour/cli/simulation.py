"""The work behind `cardhour simulate`: checks, replays (in processes), JSON and tables.

`run` raises `InvalidInput`/`NotFound` before any replay starts when the input is bad (seeds,
policy, unreadable or malformed files, nothing published to compare with); the command wrapper
turns those into one stderr line and exit code 2.
"""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from cardhour.cli.common import out
from cardhour.core.errors import InvalidInput, NotFound
from cardhour.scheduler import profiles
from cardhour.scheduler.framework import PROFILES
from cardhour.scheduler.replay.report import (
    METRICS,
    Summary,
    compare,
    format_seeds,
    parse_published,
    parse_seeds,
    published_for,
    reference_policy,
    run_record,
    summarise,
)
from cardhour.scheduler.replay.run import MAX_BARE_METAL_SHARE, MAX_TUNE, replay
from cardhour.scheduler.replay.trace import TraceError, parse_nodes, parse_pods
from cardhour.scheduler.request import Request
from cardhour.scheduler.state import NodeInfo

T = TypeVar("T")
PUBLISHED_FILE = Path("fgd_expected_results") / "summary_by_arrival.csv"
LABELS = {
    "unallocated_gpu_pct": "UNALLOCATED GPU %",
    "frag_pct_of_total": "FRAG % OF TOTAL GPU",
    "frag_rate_pct": "FRAG % OF IDLE GPU",
}


@dataclass(frozen=True)
class Options:
    trace: Path
    nodes: Path
    policy: str | None
    seeds: str
    tune: float
    bare_metal: float
    jobs: int
    as_json: bool
    compare: bool


def run(opts: Options) -> None:
    """Check everything, replay every seed, print JSON or tables (see the command's help)."""
    if not 0 < opts.tune <= MAX_TUNE:
        raise InvalidInput(f"--tune must be in (0, {MAX_TUNE:g}], got {opts.tune}")
    if not 0 <= opts.bare_metal <= MAX_BARE_METAL_SHARE:
        raise InvalidInput(
            f"--bare-metal must be in [0, {MAX_BARE_METAL_SHARE}], got {opts.bare_metal}"
        )
    try:
        seeds = parse_seeds(opts.seeds)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    policy = opts.policy or profiles.DEFAULT_POLICY
    if policy not in PROFILES:
        raise InvalidInput(f"unknown policy {policy!r}; known: {', '.join(sorted(PROFILES))}")
    pods = _parse(opts.trace, "trace", parse_pods)
    fleet = _parse(opts.nodes, "node list", parse_nodes)
    published = _published(opts.trace, policy) if opts.compare else None

    records = _run_seeds(fleet, pods, policy, seeds, opts.tune, opts.bare_metal, opts.jobs)
    summary = summarise(records)
    payload: dict[str, Any] = {
        "trace": str(opts.trace),
        "nodes": str(opts.nodes),
        "policy": policy,
        "tune": opts.tune,
        "bare_metal": opts.bare_metal,
        "seeds": seeds,
        "runs": records,
        "mean": summary.mean,
        "sd": summary.sd,
    }
    if published is not None:
        sc_policy, cells = published
        payload["published"] = {
            "source": str(opts.trace.parent / PUBLISHED_FILE),
            "workload": opts.trace.stem,
            "policy": sc_policy,
            "metrics": compare(summary, cells),
        }
    if opts.as_json:
        typer.echo(json.dumps(payload, indent=2))
    else:
        print_tables(payload, summary)


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise NotFound(f"{what} {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = " ".join(str(exc).split())
        raise InvalidInput(f"cannot read {what} {path}: {reason}") from None


def _parse(path: Path, what: str, parser: Callable[[str], T]) -> T:
    text = _read(path, what)
    try:
        return parser(text)
    except TraceError as exc:
        raise InvalidInput(f"{what} {path}: {exc}") from None


def _published(trace: Path, policy: str) -> tuple[str, dict[str, Any]]:
    """The authors' policy name and cells for this trace, or InvalidInput saying what is missing."""
    sc_policy = reference_policy(policy, profiles.DEFAULT_POLICY)
    if sc_policy is None:
        raise InvalidInput(f"no published numbers to compare policy {policy!r} with")
    path = trace.parent / PUBLISHED_FILE
    table = _parse(path, "published summary", parse_published)
    cells = published_for(table, trace.stem, sc_policy)
    if not cells:
        raise InvalidInput(f"{path} has no numbers for {trace.stem} with {sc_policy}")
    return sc_policy, cells


# Worker processes receive the parsed trace once (initializer), then only seeds.
_WORK: dict[str, Any] = {}


def _init_worker(
    fleet: list[NodeInfo], pods: list[Request], policy: str, tune: float, bare: float
) -> None:
    _WORK.update(fleet=fleet, pods=pods, policy=policy, tune=tune, bare=bare)


def _one_seed(seed: int) -> dict[str, Any]:
    w = _WORK
    return run_record(replay(w["fleet"], w["pods"], w["policy"], seed, w["tune"], w["bare"]))


def _run_seeds(
    fleet: list[NodeInfo],
    pods: list[Request],
    policy: str,
    seeds: Sequence[int],
    tune: float,
    bare: float,
    jobs: int,
) -> list[dict[str, Any]]:
    """One record per seed, sorted by seed; a progress line on stderr as each one finishes."""
    done: list[dict[str, Any]] = []

    def progress(record: dict[str, Any]) -> None:
        done.append(record)
        at = record["unallocated_gpu_pct"].get("100")
        unalloc = f"{at:.2f}% GPU unallocated at 100% arrived" if at is not None else "no 100%"
        typer.echo(
            f"seed {record['seed']} ({len(done)}/{len(seeds)}): {unalloc}, "
            f"{record['failed_pods']} of {record['pods']} pods failed, "
            f"{record['wall_seconds']:.1f} s",
            err=True,
        )

    args = (fleet, pods, policy, tune, bare)
    if jobs == 1 or len(seeds) == 1:
        _init_worker(*args)
        for seed in seeds:
            progress(_one_seed(seed))
    else:
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(jobs, len(seeds)), spawn, _init_worker, args) as pool:
            for future in as_completed([pool.submit(_one_seed, seed) for seed in seeds]):
                progress(future.result())
    return sorted(done, key=lambda r: r["seed"])


def _pm(mean: float, sd: float) -> str:
    return f"{mean:.2f} ± {sd:.2f}"


def print_tables(payload: dict[str, Any], summary: Summary) -> None:
    """A header, then one table of every metric (mean ± sd) per arrived %; with published
    numbers, one table per metric with ours, theirs, the difference and it in their sd."""
    mean, sd = summary.mean, summary.sd
    seeds = payload["seeds"]
    out.print(
        escape(
            f"{Path(payload['trace']).stem} · policy {payload['policy']} · "
            f"seeds {format_seeds(seeds)} ({len(seeds)}) · tune {payload['tune']:g}"
        )
    )
    out.print(
        f"{mean['pods']:.0f} pods per seed, {mean['failed_pods']:.0f} ± {sd['failed_pods']:.0f} "
        f"failed, {mean['wall_seconds']:.1f} s per seed"
    )
    if payload["bare_metal"] > 0:
        out.print(
            f"bare-metal nodes: {mean['bare_metal_satisfied']:.1f} of "
            f"{mean['bare_metal_requested']:.1f} satisfied (mean)"
        )
    published = payload.get("published")
    if published is None:
        table = Table(box=None, header_style="bold")
        table.add_column("ARRIVED %", justify="right")
        for metric in METRICS:
            table.add_column(f"{LABELS[metric]} (MEAN ± SD)", justify="right")
        for x in mean[METRICS[0]]:
            cells = [_pm(mean[m][x], sd[m][x]) if x in mean[m] else "-" for m in METRICS]
            table.add_row(x, *cells)
        out.print(table)
        return
    for metric in METRICS:
        title = f"{LABELS[metric]}: ours vs published {published['policy']}"
        table = Table(box=None, header_style="bold", title=escape(title), title_justify="left")
        for column in ("ARRIVED %", "OURS", "PUBLISHED", "DIFF", "DIFF IN PUBLISHED SD"):
            table.add_column(column, justify="right")
        rows = published["metrics"][metric]
        for x in mean[metric]:
            cell = rows.get(x)
            if cell is None:
                table.add_row(x, _pm(mean[metric][x], sd[metric][x]), "-", "-", "-")
                continue
            z = cell["distance_sd"]
            table.add_row(
                x,
                _pm(mean[metric][x], sd[metric][x]),
                _pm(cell["mean"], cell["sd"]),
                f"{cell['diff']:+.2f}",
                f"{z:+.1f}" if z is not None else "-",
            )
        out.print(table)
