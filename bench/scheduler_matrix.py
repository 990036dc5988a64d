"""The replay matrix of `bench/scheduler.py`: (trace, policy, seed) runs in processes, cached.

Cache layout: `<cache>/<fingerprint>/<trace stem>-<trace sha>/<policy>/<seed>.json`, one
`run_record` each, written atomically (a killed bench leaves no half file). A policy's
fingerprint hashes what its replays depend on (see `fingerprint`), so results of another engine
version are never mixed in, and a change to the lookahead reruns only the policies that use it;
old fingerprints are left for `rm -rf .bench-cache`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import multiprocessing
import os
import statistics
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cardhour.scheduler
from cardhour.scheduler import profiles
from cardhour.scheduler.framework import profile_named
from cardhour.scheduler.replay.report import (
    distance,
    parse_published,
    published_for,
    reference_policy,
    run_record,
    summarise,
)
from cardhour.scheduler.replay.run import replay
from cardhour.scheduler.replay.trace import parse_nodes, parse_pods
from cardhour.scheduler.request import Request
from cardhour.scheduler.state import NodeInfo


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


PACKAGE = Path(cardhour.scheduler.__file__).parent
# Hashed per policy instead of with the engine: profiles.py only registers the profiles (each
# policy hashes its own profile's repr), and the lookahead's modules run only for a profile with
# a lookahead (the engine calls them for nothing else), so nothing else may move into these.
LOOKAHEAD = (
    "fgd/lookahead.py",
    "kernels/lookahead_cache.py",
    "kernels/lookahead_candidates.py",
    "kernels/lookahead_choice.py",
    "kernels/lookahead_state.py",
    "kernels/lookahead.py",
)
PER_POLICY = ("profiles.py", *LOOKAHEAD)


def fingerprint(nodes_path: Path, tune: float, policy: str, package: Path = PACKAGE) -> str:
    """16 hex digits naming what `policy`'s replays depend on: the source of every module of
    `package` but `PER_POLICY`, the policy's profile (its repr: plugins, weights, settings),
    the lookahead's modules when the profile has a lookahead, the node list and the tuning."""
    profile = profile_named(policy)
    h = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        name = str(path.relative_to(package))
        if name not in PER_POLICY or (name in LOOKAHEAD and profile.lookahead is not None):
            h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(repr(profile).encode() + b"\0")
    h.update(nodes_path.read_bytes() + f"\0tune={tune!r}".encode())
    return h.hexdigest()[:16]


def combined(keys: dict[str, str]) -> str:
    """One name (16 hex digits) for a set of policies' fingerprints."""
    text = "".join(f"{policy}={key}\n" for policy, key in sorted(keys.items()))
    return _sha(text.encode())[:16]


@dataclass(frozen=True)
class Task:
    trace: Path
    policy: str
    seed: int


@functools.cache
def load_nodes(path: str) -> list[NodeInfo]:
    return parse_nodes(Path(path).read_text())


@functools.cache
def load_pods(path: str) -> list[Request]:
    return parse_pods(Path(path).read_text())


def run_task(trace: str, nodes: str, policy: str, seed: int, tune: float) -> dict[str, Any]:
    """One replay (in a worker; parsed files are cached per process)."""
    record = run_record(replay(load_nodes(nodes), load_pods(trace), policy, seed, tune))
    return {"trace": Path(trace).stem, "policy": policy, **record}


class Cache:
    """Replay records under `root`, each policy's under its fingerprint (`keys[policy]`)."""

    def __init__(self, root: Path, keys: dict[str, str]) -> None:
        self.root = root
        self.keys = dict(keys)
        self._trace_sha: dict[Path, str] = {}

    def path(self, task: Task) -> Path:
        sha = self._trace_sha.get(task.trace)
        if sha is None:
            sha = self._trace_sha[task.trace] = _sha(task.trace.read_bytes())[:10]
        key = self.keys[task.policy]
        return self.root / key / f"{task.trace.stem}-{sha}" / task.policy / f"{task.seed}.json"

    def get(self, task: Task) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = json.loads(self.path(task).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        return data

    def put(self, task: Task, record: dict[str, Any]) -> None:
        path = self.path(task)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(record, indent=1))
        os.replace(tmp, path)


def run_matrix(
    tasks: Sequence[Task],
    nodes: Path,
    tune: float,
    cache: Cache,
    jobs: int,
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> dict[Task, dict[str, Any]]:
    """Every task's record: cached ones read, the rest computed in `jobs` spawned processes and
    cached as each finishes (so an interrupted matrix resumes where it stopped)."""
    results: dict[Task, dict[str, Any]] = {}
    missing: list[Task] = []
    for task in tasks:
        hit = cache.get(task)
        if hit is None:
            missing.append(task)
        else:
            results[task] = hit
    log(f"matrix: {len(tasks)} runs, {len(results)} cached, {len(missing)} to compute")
    if not missing:
        return results
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max(1, min(jobs, len(missing))), spawn) as pool:
        futures = {
            pool.submit(run_task, str(t.trace), str(nodes), t.policy, t.seed, tune): t
            for t in missing
        }
        for i, future in enumerate(as_completed(futures), 1):
            task = futures[future]
            record = future.result()
            cache.put(task, record)
            results[task] = record
            at = record["unallocated_gpu_pct"].get("100", float("nan"))
            log(
                f"[{i}/{len(missing)}] {task.trace.stem} {task.policy} seed {task.seed}: "
                f"{at:.2f}% unallocated at 100%, {record['wall_seconds']:.1f} s"
            )
    return results


def paired(runs: Sequence[dict[str, Any]], fgd: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Seed by seed, this policy's unallocated GPU % at 100% minus our fgd's (same shuffle and
    tie order per seed): mean, sample sd, and on how many seeds it is lower."""
    diffs = [
        r["unallocated_gpu_pct"]["100"] - f["unallocated_gpu_pct"]["100"]
        for r, f in zip(runs, fgd, strict=True)
    ]
    return {
        "mean": statistics.mean(diffs),
        "sd": statistics.stdev(diffs) if len(diffs) > 1 else 0.0,
        "lower": sum(d < 0 for d in diffs),
        "n": len(diffs),
    }


def matrix_cells(
    results: dict[Task, dict[str, Any]],
    traces: list[Path],
    policies: list[str],
    seeds: list[int],
    published_file: Path,
) -> list[dict[str, Any]]:
    """Per (trace, policy): unallocated GPU % at 100 (mean, sd, n) and the published cell."""
    try:
        table = parse_published(published_file.read_text())
    except FileNotFoundError:
        table = {}
    cells = []
    for trace in traces:
        for policy in policies:
            runs = [results[Task(trace, policy, s)] for s in seeds]
            vs_fgd = None
            if policy != "fgd" and "fgd" in policies:
                vs_fgd = paired(runs, [results[Task(trace, "fgd", s)] for s in seeds])
            summary = summarise(runs)
            mean = summary.mean["unallocated_gpu_pct"].get("100", float("nan"))
            sd = summary.sd["unallocated_gpu_pct"].get("100", float("nan"))
            ref = reference_policy(policy, profiles.DEFAULT_POLICY)
            found = published_for(table, trace.stem, ref) if ref else {}
            pub = found.get("unallocated_gpu_pct", {}).get("100")
            cells.append(
                {
                    "trace": trace.stem,
                    "policy": policy,
                    "n": summary.n,
                    "mean": mean,
                    "sd": sd,
                    "published": {"policy": ref, "mean": pub.mean, "sd": pub.sd} if pub else None,
                    "distance_sd": distance(mean, pub) if pub else None,
                    "vs_fgd": vs_fgd,
                }
            )
    return cells
