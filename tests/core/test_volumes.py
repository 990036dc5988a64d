"""The pure rules of volumes: sizes, names, mount requests, the cost of the time kept, and the
fleet file's storage section."""

from __future__ import annotations

import pytest

from cardhour.core.errors import InvalidInput
from cardhour.core.money import Money
from cardhour.core.storage.volumes import (
    MountRequest,
    Storage,
    StorageFile,
    check_name,
    check_path,
    parse_mounts,
    parse_size,
    storage_cost,
)


@pytest.mark.parametrize(
    ("text", "gib"),
    [("100", 100), (100, 100), ("100G", 100), ("100gb", 100), (" 7 GiB ", 7), ("2T", 2048),
     ("1tib", 1024)],
)  # fmt: skip
def test_sizes_are_whole_gib(text: str | int, gib: int) -> None:
    assert parse_size(text, 10_240) == gib


@pytest.mark.parametrize(
    ("text", "said"),
    [("0", "at least 1 GiB"), ("0G", "at least 1 GiB"), ("-1", "bad size"), ("1.5G", "bad size"),
     ("lots", "bad size"), ("", "bad size"), ("10M", "bad size"), ("11T", "largest volume"),
     ("10241", "largest volume"), (True, "bad size")],
)  # fmt: skip
def test_bad_sizes_say_why(text: str | int, said: str) -> None:
    with pytest.raises(InvalidInput, match=said):
        parse_size(text, 10_240)


def test_names() -> None:
    assert check_name("data-1") == "data-1"
    for bad in ("Data", "-data", "data-", "a" * 64, "da_ta", ""):
        with pytest.raises(InvalidInput, match="bad volume name"):
            check_name(bad)


def test_mount_paths() -> None:
    assert check_path("/data") == "/data"
    assert check_path("/data/") == "/data"
    assert check_path("/root/work") == "/root/work"
    for bad in ("data", "/a/../b", "/data//x", "/a b", "", "/x;rm", "/./etc", "/root/./.ssh"):
        with pytest.raises(InvalidInput, match="bad mount path"):
            check_path(bad)
    with pytest.raises(InvalidInput):
        check_path("/")
    for system in ("/etc", "/etc/x", "/usr/local", "/proc", "/dev/shm", "/root/.ssh", "/tmp"):
        with pytest.raises(InvalidInput, match="system path"):
            check_path(system)


def test_mount_requests() -> None:
    found = parse_mounts(["data:/data", {"volume": "more", "path": "/more"}])
    assert found == [MountRequest("data", "/data"), MountRequest("more", "/more")]
    for bad, said in (
        (["data"], "is not NAME:/path"),
        (["data:/a", "data:/b"], "listed twice"),
        (["a:/x", "b:/x"], "used twice"),
        ([f"v{i}:/v{i}" for i in range(9)], "at most 8"),
    ):
        with pytest.raises(InvalidInput, match=said):
            parse_mounts(bad)


def test_cost_is_the_cumulative_time_rated_half_up() -> None:
    price = Money.parse("0.0003").micros  # 300 µ per GB-hour
    assert storage_cost(100, 3600, price) == 30_000
    assert storage_cost(1, 1, price) == 0  # 0.083 µ
    assert storage_cost(1, 6, price) == 1  # 0.5 µ: half up
    assert storage_cost(100, 0, price) == 0
    # rated on the cumulative time: the sum of the charges is the cost of the whole
    total, billed = 0, 0
    for second in range(1, 100):
        due = storage_cost(3, second * 7, price) - billed
        billed += due
        total = storage_cost(3, second * 7, price)
    assert billed == total


def test_the_fleet_files_storage_section() -> None:
    spec = StorageFile(price_gb_hour="0.0003", prices={"wh1": "0.0002"},
                       shared_paths={"bj1": "/srv/volumes"})  # fmt: skip
    storage = Storage.from_file(spec, "CNY")
    assert storage.price("bj1") == Money.parse("0.0003")
    assert storage.price("wh1") == Money.parse("0.0002")
    assert storage.shared_path("bj1") == "/srv/volumes" and storage.shared_path("wh1") is None
    with pytest.raises(ValueError, match="positive"):
        StorageFile(price_gb_hour="0")
    with pytest.raises(ValueError, match="not absolute"):
        StorageFile(shared_paths={"bj1": "srv"})
