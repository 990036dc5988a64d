"""`bench/billing.py` end to end at a tiny size on SQLite, so the bench keeps working."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "billing.py"
ARGS = ["--instances", "23", "--runs", "1", "--databases", "sqlite"]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    sys.path.insert(0, str(BENCH.parent))  # the bench imports its sibling billing_setup
    try:
        spec = importlib.util.spec_from_file_location("bench_billing", BENCH)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH.parent))
    return module


def test_a_small_run_is_balanced_and_billed_exactly(bench: ModuleType) -> None:
    report = bench.run(bench.parse_args(ARGS), ARGS)
    (result,) = report["results"]
    assert result["instances"] == 23 and result["users"] == 3  # the last user has 3
    assert result["transfers_posted"] == [23]  # one usage transfer per instance, from cash
    assert result["baseline_transfers_posted"] == [23]
    assert result["balanced"] and result["misbilled"] == 0, result
    assert result["ratio"] is not None and not result["target"]
    assert bench.failures(report) == []
    assert re.search(r"^sqlite +23 +23 +[0-9.]+ s", bench.render_console(report), re.M)
    markdown = bench.render_markdown(report)
    assert markdown.startswith("# Billing benchmark\n")
    assert "| sqlite | 23 | 23 |" in markdown and "make bench-billing BENCH_ARGS=" in markdown
    old = f"# Billing benchmark\n\nstale\n{bench.NOTES_MARKER}\n\n## Notes\n\nkept\n"
    assert bench.keep_notes(markdown, old) == markdown + "\n## Notes\n\nkept\n"


def test_no_write_prints_the_table_and_writes_nothing(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "billing.md"
    assert bench.main([*ARGS, "--no-baseline", "--no-write", "--out", str(out)]) == 0
    assert "one metering pass over 23 running instances" in capsys.readouterr().out
    assert not out.exists()
