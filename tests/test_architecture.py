"""DESIGN.md's layering, enforced: nothing imports upward (import-linter contracts in pyproject)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "8 kept, 0 broken" in result.stdout


def test_services_and_store_never_commit() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for package in ("services", "store")
        for path in (ROOT / "src/cardhour" / package).rglob("*.py")
        if ".commit()" in path.read_text()
    ]
    assert offenders == []
