"""The kernels' on-disk cache is invalidated by a change to any kernel module
(kernels/numba_cache.py): numba alone would keep a caller compiled with an old copy of a
callee from another module."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from numba.core import caching, registry

from cardhour.scheduler.kernels import fgd as fgd_kernels
from cardhour.scheduler.kernels import lookahead as lookahead_kernels
from cardhour.scheduler.kernels import (
    lookahead_cache,
    lookahead_candidates,
    lookahead_choice,
    lookahead_state,
)
from cardhour.scheduler.kernels import numba_cache as kernel_cache


def _write(path: Path, text: str) -> None:
    path.write_text(text)


def test_stamp_covers_every_module_that_imports_numba_and_nothing_else(tmp_path: Path) -> None:
    _write(tmp_path / "callee.py", "import numba\n\nX = 1\n")
    _write(tmp_path / "caller.py", "from numba import njit\n\nY = 1\n")
    _write(tmp_path / "plain.py", "Z = 1\n")
    before = kernel_cache.source_stamp(tmp_path)

    _write(tmp_path / "plain.py", "Z = 2\n")
    assert kernel_cache.source_stamp(tmp_path) == before
    _write(tmp_path / "callee.py", "import numba\n\nX = 2\n")
    changed = kernel_cache.source_stamp(tmp_path)
    assert changed != before
    _write(tmp_path / "caller.py", "from numba import njit\n\nY = 2\n")
    assert kernel_cache.source_stamp(tmp_path) not in (before, changed)


def _kernels() -> list[registry.CPUDispatcher]:
    modules = (
        fgd_kernels,
        lookahead_cache,
        lookahead_kernels,
        lookahead_candidates,
        lookahead_choice,
        lookahead_state,
    )
    found = [
        value
        for module in modules
        for value in vars(module).values()
        if isinstance(value, registry.CPUDispatcher) and value.py_func.__module__ == module.__name__
    ]
    assert len(found) >= 10
    return found


def test_every_kernel_of_the_package_is_stamped_with_all_kernel_sources() -> None:
    stamp = kernel_cache.source_stamp()
    for kernel in _kernels():
        locator = kernel._cache._impl._locator
        assert isinstance(locator, kernel_cache.LOCATORS), kernel.py_func.__qualname__
        assert locator.get_source_stamp() == stamp


def test_functions_outside_the_package_keep_numbas_own_locator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "elsewhere.py"
    _write(path, "import numba\n\n@numba.njit(cache=True)\ndef inc(x):\n    return x + 1\n")
    spec = importlib.util.spec_from_file_location("elsewhere", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "elsewhere", module)
    spec.loader.exec_module(module)

    locator = module.inc._cache._impl._locator
    assert not isinstance(locator, kernel_cache.LOCATORS)
    assert module.inc(1) == 2


def test_install_is_idempotent() -> None:
    kernel_cache.install()
    kernel_cache.install()
    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl
    classes = impl._locator_classes
    assert classes[: len(kernel_cache.LOCATORS)] == list(kernel_cache.LOCATORS)
    assert sum(c in kernel_cache.LOCATORS for c in classes) == len(kernel_cache.LOCATORS)


_CALLER = """
import sys
from pathlib import Path
if sys.argv[1] == "ours":
    from cardhour.scheduler.kernels import numba_cache as kernel_cache
    kernel_cache.PACKAGE = Path.cwd().resolve()
    kernel_cache.install()
import caller
print(caller.g())
"""


def _run_caller(directory: Path, locators: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _CALLER, locators],
        cwd=directory,
        capture_output=True,
        text=True,
        check=True,
        # no .pyc: an edit within the second of the first write, same size, would load the
        # old bytecode of the callee, and the test would see "1" whatever the locators do
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(directory), "PYTHONDONTWRITEBYTECODE": "1"},
    )
    return done.stdout.strip()


@pytest.mark.parametrize(("locators", "after_edit"), [("numba", "1"), ("ours", "2")])
def test_an_edit_to_a_callees_module_recompiles_its_callers(
    tmp_path: Path, locators: str, after_edit: str
) -> None:
    """numba alone keeps the caller's cached copy of the old callee (the control: "1"); with
    the package's locators the caller is compiled again."""
    _write(
        tmp_path / "callee.py", "import numba\n\n@numba.njit(cache=True)\ndef f():\n    return 1\n"
    )
    _write(
        tmp_path / "caller.py",
        "import numba\nfrom callee import f\n\n@numba.njit(cache=True)\ndef g():\n    return f()\n",
    )
    assert _run_caller(tmp_path, locators) == "1"
    _write(
        tmp_path / "callee.py", "import numba\n\n@numba.njit(cache=True)\ndef f():\n    return 2\n"
    )
    assert _run_caller(tmp_path, locators) == after_edit
