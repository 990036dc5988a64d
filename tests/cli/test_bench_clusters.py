"""`bench/clusters.py` end to end (one run, SQLite, print only), so the bench keeps working: the
128-node cluster reaches `running` through every readiness stage on the fewest leaves."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "clusters.py"


def test_one_run_passes_its_checks() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARDHOUR_")}
    r = subprocess.run(
        [sys.executable, str(BENCH), "--runs", "1", "--no-write", "--no-target"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("sqlite"))
    assert re.search(r" 4 \(4\) +ok +≤ 5 s: (pass|FAIL)$", line), line
