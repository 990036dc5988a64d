"""numba's on-disk cache for the scheduler's kernels, invalidated by a change to any of them.

numba stamps a cached function with its own source file only, but a kernel carries compiled
copies of the kernels it calls from other modules (`kernels.lookahead.rollouts` holds
`kernels.lookahead_cache.prepare_lists`, `kernels.fgd.score_node`, ...). After an edit to, or an
upgrade of, only a callee's module, numba would go on loading the caller with the old callee
inside. Here every kernel of this package is stamped with one hash of the source of every module
of the package that imports numba, so a change to any of them recompiles them all (2-3 minutes,
`make kernels`). `kernels.fgd` calls `install` before it defines a kernel, and every other
kernel module imports `kernels.fgd` first.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path
from typing import Any

from numba.core import caching
from numba.core.caching import InTreeCacheLocator, UserProvidedCacheLocator, UserWideCacheLocator

PACKAGE = Path(__file__).resolve().parent
_USES_NUMBA = re.compile(rb"^\s*(import numba|from numba[ .])", re.MULTILINE)


def source_stamp(package: Path = PACKAGE) -> bytes:
    """SHA-256 over the name and source of every module in `package` that imports numba."""
    h = hashlib.sha256()
    for path in sorted(package.glob("*.py")):
        text = path.read_bytes()
        if _USES_NUMBA.search(text):
            h.update(path.name.encode() + b"\0" + text + b"\0")
    return h.digest()


@cache
def _stamp_of(package: Path) -> bytes:
    return source_stamp(package)


class _PackageStamped:
    """A numba cache locator for this package's functions whose freshness stamp is the
    package's kernel sources (`source_stamp`); declines functions defined elsewhere."""

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> Any:
        if Path(py_file).resolve().parent != PACKAGE:
            return None
        return super().from_function(py_func, py_file)  # type: ignore[misc]

    def get_source_stamp(self) -> bytes:
        return _stamp_of(PACKAGE)


class PackageUserProvidedLocator(_PackageStamped, UserProvidedCacheLocator):
    """NUMBA_CACHE_DIR, when set."""


class PackageInTreeLocator(_PackageStamped, InTreeCacheLocator):
    """__pycache__ next to the sources (the usual case)."""


class PackageUserWideLocator(_PackageStamped, UserWideCacheLocator):
    """The user's cache directory, when the sources' directory is read-only."""


LOCATORS = (PackageUserProvidedLocator, PackageInTreeLocator, PackageUserWideLocator)


def install() -> None:
    """Put this package's locators ahead of numba's own (idempotent; `_CacheImpl` in older
    numba)."""
    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # type: ignore[attr-defined]
    classes = impl._locator_classes
    if classes[: len(LOCATORS)] != list(LOCATORS):
        classes[:0] = [c for c in LOCATORS if c not in classes]
