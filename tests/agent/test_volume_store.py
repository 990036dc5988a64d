"""The agent's volume store alone (`agent/volumes.py`), with real ext4 images and loop mounts
(root and mkfs.ext4 needed, as the agent has them): made once and kept, a half-made image from a
crash made again, a volume that held data never made afresh, one image mounted by one process at
a time, released and deleted."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cardhour.agent.volumes import Busy, Volumes, in_use, run_task
from cardhour.runtime.base import RuntimeFailure
from tests.agent.conftest import unmount_under

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mkfs.ext4") is None,
    reason="loop mounts need root and e2fsprogs (the agent runs as root)",
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Volumes]:
    yield Volumes(tmp_path / "own", tmp_path / "mounts")
    unmount_under(tmp_path)


def test_made_once_mounted_released_and_deleted(store: Volumes, tmp_path: Path) -> None:
    spec = {"id": "v1", "size_gb": 1, "store": None, "formatted": False}
    point = store.attach(spec)
    assert point == tmp_path / "mounts" / "v1" and point.is_mount()
    (point / "kept.txt").write_text("kept")
    assert store.attach(spec) == point  # again: the same mount, nothing made
    store.release({"v1": spec})
    assert point.is_mount()
    store.release(set())
    assert not point.exists()
    image = tmp_path / "own" / "v1.ext4"
    assert image.stat().st_size == 1024**3 and image.stat().st_blocks * 512 < 64 * 1024**2
    again = store.attach({**spec, "formatted": True})
    assert (again / "kept.txt").read_text() == "kept"
    store.delete(spec)  # unmounted first
    assert not image.exists() and not again.exists()
    store.delete(spec)  # gone already: fine


def test_a_half_made_image_is_made_again_and_data_is_never_made_afresh(
    store: Volumes, tmp_path: Path
) -> None:
    (tmp_path / "own").mkdir()
    leftover = tmp_path / "own" / "v2.ext4.0123456789ab.part"
    leftover.write_bytes(b"cut short by a crash")
    spec = {"id": "v2", "size_gb": 1, "store": None, "formatted": False}
    point = store.attach(spec)
    assert point.is_mount()
    assert {p.name for p in (tmp_path / "own").iterdir()} == {leftover.name, "v2.ext4"}
    store.delete(spec)
    assert list((tmp_path / "own").iterdir()) == []  # the leftover swept too
    with pytest.raises(RuntimeFailure, match="its data is not on this host"):
        store.attach({"id": "v3", "size_gb": 1, "store": None, "formatted": True})
    assert not (tmp_path / "own" / "v3.ext4").exists()
    with pytest.raises(RuntimeFailure, match="bad volume id"):
        store.attach({"id": "../etc", "size_gb": 1, "store": None})


def test_a_shared_image_is_mounted_by_one_process_at_a_time(store: Volumes, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    spec = {"id": "v4", "size_gb": 1, "store": str(shared), "formatted": False}
    store.attach(spec)
    store.release(set())  # made on shared storage, now free
    holder = subprocess.Popen(  # another host's agent holds it
        [sys.executable, "-c",
         "import fcntl,os,sys,time; fd=os.open(sys.argv[1], os.O_RDWR); "
         "fcntl.lockf(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
         str(shared / "v4.ext4")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(Busy, match="in use on another host"):
            store.attach(spec)
        assert not (tmp_path / "mounts" / "v4").is_mount()
    finally:
        holder.kill()
        holder.wait()
    assert store.attach(spec).is_mount()


def test_images_on_shared_storage_carry_ext4_multi_mount_protection(
    store: Volumes, tmp_path: Path
) -> None:
    """On one machine a second `mount -o loop` of an image reuses its loop device (one file
    system, no harm); across hosts the kernel refuses a second mount of an `mmp` image (measured
    by hand with a second loop device: 21 s, then "already mounted or mount point busy")."""
    store.attach({"id": "v6", "size_gb": 1, "store": str(tmp_path / "shared")})
    store.attach({"id": "v7", "size_gb": 1, "store": None})

    def features(image: Path) -> str:
        shown = subprocess.run(
            ["dumpe2fs", "-h", str(image)], capture_output=True, text=True, check=True
        ).stdout
        return next(line for line in shown.splitlines() if line.startswith("Filesystem features"))

    assert " mmp" in features(tmp_path / "shared" / "v6.ext4")
    assert " mmp" not in features(tmp_path / "own" / "v7.ext4")


def test_a_restarted_agent_locks_the_mounts_its_containers_kept(
    store: Volumes, tmp_path: Path
) -> None:
    spec = {"id": "v5", "size_gb": 1, "store": str(tmp_path / "shared"), "formatted": False}
    store.attach(spec)
    restarted = Volumes(tmp_path / "own", tmp_path / "mounts")  # the old one's locks are gone
    for fd in store._locks.values():  # the old agent died: its descriptors and locks went
        os.close(fd)
    store._locks.clear()
    restarted.release({"v5": spec})
    assert (tmp_path / "mounts" / "v5").is_mount() and "v5" in restarted._locks


def test_tasks_and_what_is_in_use() -> None:
    specs = [
        {"workload": "a", "volumes": [{"id": "x"}, {"id": "y"}]},
        {"workload": "b"},
        {"workload": "vol-delete-z", "kind": "volume-delete", "volume": {"id": "z"}},
    ]
    assert in_use(specs) == {"x": {"id": "x"}, "y": {"id": "y"}}
    failed = run_task(None, specs[2])
    assert failed == {"workload": "vol-delete-z", "state": "failed",
                      "error": "this agent keeps no volumes"}  # fmt: skip
