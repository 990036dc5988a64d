"""`bench/launch.py` end to end on a tiny fleet (SQLite, one API worker, a few seconds, print
only), so the bench keeps working: both paths serve launches, the reconcilers settle, and the
checks hold (every accepted launch placed or pending with a reason, no GPU over-allocated)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "launch.py"


def test_both_paths_pass_their_checks() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARDHOUR_")}
    args = ["--database", "sqlite", "--nodes", "40", "--clients", "4", "--workers", "1"]
    args += ["--seconds", "2", "--rate", "20", "--no-write", "--no-target"]
    r = subprocess.run(
        [sys.executable, str(BENCH), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [line for line in r.stdout.splitlines() if re.match(r"(new|old) +\d", line)]
    lines = {line.split()[0]: line for line in rows}
    assert set(lines) == {"new", "old"}, r.stdout
    for line in lines.values():
        assert " ok " in line, line  # the checks column
        assert int(line.split()[1].replace(",", "")) > 0, line  # launches accepted
