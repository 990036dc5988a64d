"""A probe of the garbage collector in `cardhour up`, for benchmarks: put this folder on
PYTHONPATH of the server (`bench/agents.py` passes its environment on) and set

- `CARDHOUR_GC_PAUSES=FILE`: one line per collection of generation 2, or of any generation
  that took over 5 ms: `<unix time> gen<N> <ms> collected=<objects freed>`;
- `CARDHOUR_GC_GARBAGE=FILE`: the collector keeps what it frees (`gc.DEBUG_SAVEALL`) and every
  20 s writes how many objects of each type it was, then drops them (the types show what makes
  reference cycles);
- `CARDHOUR_GC_THRESHOLD0=N`: generation 0's threshold instead of `cardhour up`'s.

Example (docs/benchmarks/agents.md): `CARDHOUR_GC_PAUSES=/tmp/pauses.txt PYTHONPATH=bench/gcprobe
scripts/with-postgres.sh .venv/bin/python bench/agents.py --seconds 60 --no-write --no-target`.
Only a process started as `cardhour up` is probed.
"""

from __future__ import annotations

import collections
import gc
import os
import sys
import threading
import time
from typing import Any

PROBED = len(sys.argv) > 1 and sys.argv[1] == "up"


def _pauses(path: str) -> None:
    started: list[float] = [0.0]
    out = open(path, "a", buffering=1)  # noqa: SIM115 - open for the process's life

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        ms = (time.perf_counter() - started[0]) * 1000
        if info["generation"] == 2 or ms > 5:
            out.write(
                f"{time.time():.3f} gen{info['generation']} {ms:.1f} "
                f"collected={info['collected']}\n"
            )

    gc.callbacks.append(callback)


def _garbage(path: str) -> None:
    gc.set_debug(gc.DEBUG_SAVEALL)

    def dump() -> None:
        while True:
            time.sleep(20)
            garbage = list(gc.garbage)
            gc.garbage.clear()
            counts = collections.Counter(type(o).__qualname__ for o in garbage)
            with open(path, "a") as out:
                out.write(f"--- {time.time():.0f} {len(garbage)} objects\n")
                out.writelines(f"{n:8d} {name}\n" for name, n in counts.most_common(25))
            del garbage

    threading.Thread(target=dump, name="gc-garbage", daemon=True).start()


def _threshold0(value: int) -> None:
    original = gc.set_threshold

    def set_threshold(_first: int, *rest: int) -> None:
        original(value, *rest)

    gc.set_threshold = set_threshold  # type: ignore[assignment]


if PROBED:
    if os.environ.get("CARDHOUR_GC_PAUSES"):
        _pauses(os.environ["CARDHOUR_GC_PAUSES"])
    if os.environ.get("CARDHOUR_GC_GARBAGE"):
        _garbage(os.environ["CARDHOUR_GC_GARBAGE"])
    if os.environ.get("CARDHOUR_GC_THRESHOLD0"):
        _threshold0(int(os.environ["CARDHOUR_GC_THRESHOLD0"]))
