"""`cardhour estimate` in process (Typer's CliRunner): the README's two commands, JSON, errors.

The must-show figures of docs/dev/estimator.md are measured by these commands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cardhour.cli.main import app


def estimate(*args: str) -> Any:
    """The developer's own fleet file must not change the figures: the demo price book."""
    return CliRunner().invoke(app, ["estimate", *args], env={"CARDHOUR_FLEET_FILE": None})


def as_json(*args: str) -> dict[str, Any]:
    result = estimate(*args, "--json")
    assert result.exit_code == 0, result.output
    payload: dict[str, Any] = json.loads(result.stdout)
    return payload


def test_estimate_json() -> None:
    data = as_json("--model", "llama3-70b", "--tokens", "15T", "--gpu", "H100", "--gpus", "8",
                   "--mfu", "0.4", "--goodput", "0.9", "--price", "1.90")  # fmt: skip
    assert data["flops"] == pytest.approx(7.316e24, rel=1e-3)
    assert data["gpu_hours"] == pytest.approx(5_705_697.39)
    assert data["days"] == pytest.approx(29_717.17)
    assert data["tokens_per_second_per_gpu"] == pytest.approx(811.4)
    assert data["seconds"] == 2_567_563_825
    # 8 × 2,567,563,825 s ÷ 3,600 × 1.90 = 10,840,825.03888… → half up to the micro-unit
    assert data["cost_on_demand"] == "10840825.038889"
    assert data["implied_mfu"] is None and data["feasible"] is True


def test_405b_lands_near_the_card() -> None:
    data = as_json("--model", "llama3.1-405b", "--tokens", "15.6T", "--gpus", "16384",
                   "--mfu", "0.404", "--goodput", "0.9")  # fmt: skip
    assert data["flops_dense"] == pytest.approx(3.8e25, rel=0.05)
    assert data["gpu_hours"] == pytest.approx(30.84e6, rel=0.10)
    assert data["gpu_hours"] == 31_776_831.72


@pytest.mark.parametrize(
    ("model", "hours", "implied"), [("llama3-8b", "1.3M", 0.1978), ("llama3-70b", "6.4M", 0.3209)]
)
def test_check_the_model_cards(model: str, hours: str, implied: float) -> None:
    data = as_json("--check", "--model", model, "--tokens", "15T", "--gpu", "H100", "--gpus", "8",
                   "--gpu-hours", hours)  # fmt: skip
    assert round(data["implied_mfu"], 4) == implied
    assert data["feasible"] is True and data["shortfall_x"] is None
    assert "more than one clean run" in data["verdict"] or model == "llama3-70b"


def test_check_an_impossible_claim() -> None:
    data = as_json("--check", "--model", "llama3-70b", "--tokens", "15T", "--gpu", "H100",
                   "--gpus", "8", "--days", "24", "--price", "1.90")  # fmt: skip
    assert data["feasible"] is False and data["shortfall_x"] == pytest.approx(742.93, abs=0.01)
    assert data["claim_cost_on_demand"] == "8755.20"  # 8 × 24 × 24 × 1.90
    human = estimate("--check", "--model", "llama3-70b", "--tokens", "15T", "--gpus", "8",
                     "--days", "24")  # fmt: skip
    assert human.exit_code == 0
    text = " ".join(human.stdout.split())
    assert "not feasible" in text and "falls short by 742.93×" in text
    assert "implied MFU = FLOPs ÷ (GPU-seconds × peak)" in text


def test_human_output_shows_the_formula_and_other_providers() -> None:
    result = estimate("--model", "llama3-8b", "--tokens", "1T", "--gpus", "64")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    for needle in (
        "Llama 3 8B · pretrain · 1T tokens · 64 × H100 SXM 80GB",
        "FLOPs per token = 6·N + 12·L·H·Q·T = 6 × 8,030,261,248 + 12 × 32 × 4,096 × 8,192",
        "GPU-seconds = FLOPs ÷ (peak × MFU × goodput)",
        "price book, H100 in Beijing 1",
        "RunPod community",
        "not live",
    ):
        assert needle in text, needle


def test_fleet_file_prices(tmp_path: Path) -> None:
    from cardhour.settings import default_fleet_text

    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(default_fleet_text().replace('on_demand: "1.90"', 'on_demand: "2.50"'))
    data = as_json("--model", "llama3-8b", "--tokens", "1T", "--fleet-file", str(fleet))
    assert data["price_on_demand"] == "2.50"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "llama3-8b", "--tokens", "lots"], "error: invalid_input: tokens"),
        (["--model", "nope", "--tokens", "1T"], "error: invalid_input: unknown model 'nope'"),
        (["--tokens", "1T"], "error: invalid_input: give --model"),
        (["--model", "llama3-8b", "--tokens", "1T", "--gpus", "abc"], "GPU count"),
        (["--model", "llama3-8b", "--tokens", "1T", "--mfu", "2"], "MFU must be"),
        (["--model", "llama3-8b", "--tokens", "1T", "--check"], "--days or --gpu-hours"),
        (["--model", "llama3-8b", "--tokens", "1T", "--check", "--gpu-hours", "x"], "GPU-hours"),
        (["--model", "llama3-8b", "--tokens", "1T", "--fleet-file", "/nonexistent"], "fleet"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = estimate(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert result.stdout == ""
