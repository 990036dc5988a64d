"""DESIGN.md's layering and the house's size rules, enforced: nothing imports upward, capabilities
depend one way, only the reconcilers and the composition root touch backends (import-linter
contracts in pyproject.toml); no import cycle, no module over 400 lines, no flat folder of more
than 15 modules."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src/cardhour"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
CONTRACTS = 13
MAX_LINES = 400
MAX_MODULES = 15
#: Alembic revisions are a numbered history, not modules anyone navigates.
NOT_A_ROOM = {PACKAGE / "db/migrations/versions"}


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=root,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root / "src")},
        capture_output=True,
        text=True,
        check=False,
    )


def test_import_contracts_hold() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{CONTRACTS} kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        (
            "services/billing/wallet.py",
            "from cardhour.services.compute import instances",
            "billing imports no capability above it, in any layer",
        ),
        (
            "store/grants/hours.py",
            "from cardhour.store.marketplace import apps",
            "Capabilities depend one way inside each layer",
        ),
        (
            "services/compute/fleet.py",
            "from cardhour.backends.base import Backend",
            "Only the reconcilers and the composition root touch backends",
        ),
        (
            "api/routers/billing/wallet.py",
            "from cardhour.api.routers.compute import instances",
            "API routers of different capabilities are independent",
        ),
        (
            "store/compute/nodes.py",
            "from cardhour.services.compute import fleet",
            "Layers: nothing imports upward",
        ),
    ],
)
def test_a_deliberate_violation_breaks_its_contract(
    tmp_path: Path, module: str, line: str, contract: str
) -> None:
    """The same contracts over a copy of the tree with one bad import added: the run fails and
    names the contract it broke (so the contracts are not vacuous)."""
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "src/cardhour" / module
    target.write_text(target.read_text() + f"\n{line}  # noqa\n")
    result = _lint_imports(tmp_path)
    assert result.returncode != 0, result.stdout
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, result.stdout


def test_no_import_cycle() -> None:
    """No two modules import each other, directly or through others (function-level imports
    count: they are how cycles hide)."""
    graph = grimp.build_graph("cardhour", cache_dir=None)
    cycles = [
        (a, b)
        for a in sorted(graph.modules)
        for b in sorted(graph.find_modules_directly_imported_by(a))
        if a != b and not b.startswith(a + ".") and graph.chain_exists(importer=b, imported=a)
    ]
    assert cycles == []


def test_no_module_over_400_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE)): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_no_flat_folder_of_more_than_15_modules() -> None:
    crowded = {
        str(folder.relative_to(PACKAGE)): n
        for folder in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir())]
        if folder not in NOT_A_ROOM
        and (n := len([m for m in folder.glob("*.py") if m.name != "__init__.py"])) > MAX_MODULES
    }
    assert crowded == {}


def test_services_and_store_never_commit() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for package in ("services", "store")
        for path in (PACKAGE / package).rglob("*.py")
        if ".commit()" in path.read_text()
    ]
    assert offenders == []
