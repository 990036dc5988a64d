"""The scheduler section of the settings tree, and the platform building the engine from it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from cardhour.core.clock import ManualClock
from cardhour.platform import Platform
from cardhour.scheduler import DEFAULT_POLICY
from cardhour.settings import Settings
from tests.cli.test_cli import CARDHOUR, clean_env, one_line_error


def test_scheduler_policy_must_be_a_known_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CARDHOUR_SCHEDULER__POLICY", raising=False)
    assert Settings().scheduler.policy == DEFAULT_POLICY
    assert Settings().scheduler.workload_window == 1000
    with pytest.raises(ValidationError, match=r"unknown scheduling policy 'nope'; known: .*fgd"):
        Settings(scheduler={"policy": "nope"})
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        Settings(scheduler={"workload_window": 0})
    monkeypatch.setenv("CARDHOUR_SCHEDULER__POLICY", "bestfit")
    assert Settings().scheduler.policy == "bestfit"


def test_up_refuses_an_unknown_policy_in_one_line(tmp_path: Path) -> None:
    r = subprocess.run(
        [str(CARDHOUR), "up", "--port", "0", "--data-dir", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        env=clean_env(CARDHOUR_SCHEDULER__POLICY="nope"),
        timeout=60,
    )
    line = one_line_error(r, "invalid_input")
    assert "setting scheduler.policy" in line and "unknown scheduling policy 'nope'" in line


def test_platform_builds_the_scheduler_from_settings(
    database_url: str, tmp_path: Path, clock: ManualClock
) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        scheduler={"policy": "bestfit", "workload_window": 5},
    )
    platform = Platform(settings, clock=clock)
    try:
        assert platform.policy.profile.name == "bestfit"
        assert platform.scheduler.workload_window == 5
        assert platform.policy.workload is not None  # the default: 1, 2, 4, 8 GPUs per model
        assert len(platform.policy.workload) == 12
    finally:
        platform.stop()
