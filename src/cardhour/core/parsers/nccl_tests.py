"""The output of nccl-tests (`all_reduce_perf` and friends) and the bandwidth gate. Pure.

The table (NVIDIA/nccl-tests, doc/PERFORMANCE.md): one row per message size with `size count
type redop root` (older releases print no `root`), then `time algbw busbw #wrong` out of place
and the same in place; `#wrong` is `N/A` when validation is off (`-c 0`), and older releases
print the max `error` there (`2e-07`). Lines may carry a launcher's prefix (`mpirun
--tag-output`, `srun --label`), which is dropped. Footer lines:
`# Out of bounds values : N OK` and `# Avg bus bandwidth    : X`, the mean busbw over every
size run, small ones included. So the gate reads the *large-message* busbw — the mean of the
out-of-place and in-place busbw over sizes of at least `LARGE_BYTES` (1 GiB) — and reports the
average beside it; a run without such sizes cannot pass (run it with `-e 8G`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cardhour.core.errors import InvalidInput

LARGE_BYTES = 1 << 30
_NUMBER = r"[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?"
_AVG = re.compile(rf"^#\s*Avg bus bandwidth\s*:\s*({_NUMBER})", re.MULTILINE)
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*([0-9]+)\s+(\w+)", re.MULTILINE)
_DEVICE = re.compile(
    r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)",
    re.MULTILINE,
)
# what launchers put before each line: `mpirun --tag-output` ("[1,0]<stdout>:"), `srun --label`
# (" 0: "); a table row never has a colon after its first number
_PREFIX = re.compile(r"^[ \t]*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:\s)", re.MULTILINE)


@dataclass(frozen=True)
class Row:
    size: int  # bytes
    type: str
    redop: str
    oop_busbw: float  # GB/s
    ip_busbw: float
    wrong: int | None  # out-of-place + in-place; None when not validated (`-c 0`)


@dataclass(frozen=True)
class Result:
    rows: tuple[Row, ...]
    avg_busbw: float | None  # the footer's figure
    out_of_bounds: int | None
    ranks: int  # "# Rank N ... on HOST device D" lines (0 when the header was cut)
    hosts: tuple[str, ...]

    @property
    def large_busbw(self) -> float | None:
        """Mean busbw (out of place and in place) over sizes of at least 1 GiB."""
        large = [r for r in self.rows if r.size >= LARGE_BYTES]
        if not large:
            return None
        return sum(r.oop_busbw + r.ip_busbw for r in large) / (2 * len(large))

    @property
    def peak_busbw(self) -> float:
        return max(max(r.oop_busbw, r.ip_busbw) for r in self.rows)


@dataclass(frozen=True)
class GateOutcome:
    passed: bool
    large_busbw: float | None
    avg_busbw: float | None
    threshold: float
    reason: str  # one line, for events and the console


def parse(text: str) -> Result:
    """Parse one nccl-tests run. InvalidInput when no result row is found (a crashed or cut
    run), so a broken run is never read as a slow one."""
    text = _PREFIX.sub("", text)
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        row = _row(line.split())
        if row is not None:
            rows.append(row)
    if not rows:
        raise InvalidInput("no nccl-tests result rows in this output (did the run fail?)")
    avg = _AVG.search(text)
    bounds = _OUT_OF_BOUNDS.search(text)
    devices = _DEVICE.findall(text)
    return Result(
        rows=tuple(rows),
        avg_busbw=float(avg.group(1)) if avg else None,
        out_of_bounds=int(bounds.group(1)) if bounds else None,
        ranks=len(devices),
        hosts=tuple(sorted({host for _, host, _ in devices})),
    )


def _row(fields: list[str]) -> Row | None:
    """One table row: 13 fields (with `root`) or 12 (without); anything else is not a row."""
    if len(fields) == 13:
        size, _count, dtype, redop, _root, *rest = fields
    elif len(fields) == 12:
        size, _count, dtype, redop, *rest = fields
    else:
        return None
    if not size.isdigit():
        return None
    try:
        _t1, _a1, oop_busbw, wrong1, _t2, _a2, ip_busbw, wrong2 = rest
        return Row(
            int(size), dtype, redop, float(oop_busbw), float(ip_busbw), _wrong(wrong1, wrong2)
        )
    except ValueError:
        return None


def _wrong(oop: str, ip: str) -> int | None:
    """Wrong values of a row: a count in current releases; None when not validated (`N/A`) or
    when an older release printed the max error there (`2e-07`: its footer's out-of-bounds
    count says whether values were wrong). ValueError when neither."""
    try:
        return int(oop) + int(ip)
    except ValueError:
        if "N/A" in (oop, ip):
            return None
        float(oop), float(ip)  # an old release's max error; anything else is no row
        return None


def gate(result: Result, threshold_gbps: float) -> GateOutcome:
    """Pass when no value was wrong and the large-message busbw reaches `threshold_gbps`."""
    large, avg = result.large_busbw, result.avg_busbw

    def outcome(passed: bool, reason: str) -> GateOutcome:
        return GateOutcome(passed, large, avg, threshold_gbps, reason)

    wrong = sum(r.wrong or 0 for r in result.rows)
    if wrong or (result.out_of_bounds or 0):
        return outcome(False, f"{wrong + (result.out_of_bounds or 0)} wrong values: data errors")
    if large is None:
        biggest = max(r.size for r in result.rows)
        return outcome(False, f"no message of 1 GiB or more (largest {biggest} B): run with -e 8G")
    shown = f"large-message busbw {large:.1f} GB/s"
    if large < threshold_gbps:
        return outcome(False, f"{shown} below the {threshold_gbps:g} GB/s threshold")
    unchecked = result.out_of_bounds is None and all(r.wrong is None for r in result.rows)
    note = " (values not validated: run without -c 0)" if unchecked else ""
    return outcome(True, f"{shown} ≥ {threshold_gbps:g} GB/s{note}")
