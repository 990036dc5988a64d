"""A kept disk's save and load for a move (`agent.disk_copies`), against real Podman: the save
is complete or absent, reported `running` then `exited` and never redone once the loader took
the archive; the load names the disk on this host and removes the archive; a save that fails is
reported `failed` until its task goes; a load for a spec no longer wanted is not kept."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from cardhour.agent.disk_copies import DiskCopies, move_ref, run_tasks
from cardhour.agent.volumes import Busy
from cardhour.core.storage.volumes import EXPORT_TASK
from cardhour.runtime.podman import PodmanRuntime
from tests.runtime.conftest import BASE, runtime  # noqa: F401 - the images, built once


def _until(check: Any, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return found


def _report(copies: DiskCopies, task: dict[str, Any], desired: list[dict[str, Any]]) -> dict:
    return run_tasks(copies, None, [task], desired)[0]


def _in_state(copies: DiskCopies, task: dict[str, Any], state: str) -> dict | None:
    report = _report(copies, task, [])
    return report if report["state"] == state else None


def test_a_disk_saved_on_one_host_is_loaded_on_another(
    runtime: PodmanRuntime,  # noqa: F811
    tmp_path: Path,
) -> None:
    name = f"localhost/cardhour-disk/t{uuid.uuid4().hex[:10]}"
    source, target = f"{name}:src", f"{name}:dst"
    archive = str(tmp_path / "shared" / "disk-copies" / "ch-x-2.tar")
    task = {"workload": "ch-x-2-copy", "kind": EXPORT_TASK, "image": source, "archive": archive}
    spec = {"workload": "ch-x-2", "disk": target, "disk_copy": {"from": "src", "archive": archive}}
    runtime.tag(BASE, source)
    saver, loader = DiskCopies(runtime), DiskCopies(runtime)
    try:
        assert _report(saver, task, [])["state"] == "running"
        with pytest.raises(Busy, match="waiting for src"):
            loader.fetch(spec)
        done = _until(lambda: _in_state(saver, task, "exited"))
        assert done["exit_code"] == 0 and Path(archive).exists()
        assert not Path(f"{archive}.part").exists()
        assert runtime.image_labels(move_ref(archive)) is None  # the move's name dropped

        loader.wanted([], [spec])
        with pytest.raises(Busy, match="loading"):
            loader.fetch(spec)
        _until(lambda: _fetched(loader, spec))
        assert runtime.image_labels(target) is not None and not Path(archive).exists()
        # the task still wanted, the archive gone: done, not saved again
        assert _report(saver, task, [])["state"] == "exited"
        assert not Path(archive).exists() and not Path(f"{archive}.part").exists()
    finally:
        for ref in (source, target):
            runtime.remove_image(ref)


def _fetched(copies: DiskCopies, spec: dict[str, Any]) -> bool:
    try:
        copies.fetch(spec)
    except Busy:
        return False
    return True


def test_a_failed_save_is_reported_until_its_task_goes_and_a_given_up_load_is_not_kept(
    runtime: PodmanRuntime,  # noqa: F811
    tmp_path: Path,
) -> None:
    archive = str(tmp_path / "a.tar")
    missing = "localhost/cardhour-disk/nope:here"
    task = {"workload": "w-copy", "kind": EXPORT_TASK, "image": missing, "archive": archive}
    copies = DiskCopies(runtime)
    _report(copies, task, [])
    failed = _until(lambda: _in_state(copies, task, "failed"))
    assert "is not on this host" in failed["error"]
    assert _report(copies, task, [])["state"] == "failed"  # sticky while wanted
    assert run_tasks(copies, None, [], []) == []  # the task went: forgotten

    # a load that ends after its spec stopped being wanted keeps nothing
    name = f"localhost/cardhour-disk/t{uuid.uuid4().hex[:10]}"
    source, target = f"{name}:src", f"{name}:dst"
    saved = str(tmp_path / "b.tar")
    runtime.tag(BASE, source)
    try:
        runtime.save(source, saved)
        spec = {"workload": "w", "disk": target, "disk_copy": {"from": "src", "archive": saved}}
        copies.wanted([], [])  # nothing names the target disk
        with pytest.raises(Busy):
            copies.fetch(spec)
        _until(lambda: not Path(saved).exists())
        _until(lambda: copies._jobs.get(saved) is None or copies._jobs[saved].done())
        assert runtime.image_labels(target) is None
    finally:
        for ref in (source, target):
            runtime.remove_image(ref)
