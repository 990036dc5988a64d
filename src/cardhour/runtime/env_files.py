"""Renters' variables (tokens, keys) on their way into a container: a 0600 file the engine
reads at create (`--env-file`), never its command line (any user's `ps` shows that), deleted
once read; `sweep` removes one that a run cut short left behind."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from pathlib import Path


def write(path: Path, env: Mapping[str, str]) -> None:
    """`NAME=value` lines (values are one line each: `core.workload.spec`), mode 0600, in a
    0700 folder."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.writelines(f"{k}={v}\n" for k, v in sorted(env.items()))


def sweep(folder: Path, older_than: float) -> None:
    """Delete the files of `folder` last written more than `older_than` seconds ago."""
    stale_before = time.time() - older_than
    for path in folder.iterdir() if folder.is_dir() else ():
        with contextlib.suppress(FileNotFoundError):  # a concurrent run's own unlink
            if path.stat().st_mtime < stale_before:
                path.unlink()
