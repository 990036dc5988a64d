from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from cardhour.core.errors import InvalidInput
from cardhour.core.gpus import parse_gpu_request
from cardhour.core.money import Money
from cardhour.settings import default_fleet_text, load_catalog


@pytest.mark.parametrize(
    ("text", "model", "count"),
    [
        ("H100:8", "H100", 8),
        ("h100", "h100", 1),
        ("RTX4090:2", "RTX4090", 2),
        (" A800 : 4 ", "A800", 4),
    ],
)
def test_parse_gpu_request(text: str, model: str, count: int) -> None:
    req = parse_gpu_request(text)
    assert (req.model, req.count) == (model, count)


@pytest.mark.parametrize("text", ["", ":8", "H100:0", "H100:x", "H100:2000", "H100:8:1"])
def test_parse_gpu_request_refuses(text: str) -> None:
    with pytest.raises(InvalidInput):
        parse_gpu_request(text)


def test_demo_fleet() -> None:
    catalog = load_catalog()
    assert len(catalog.nodes) >= 40
    assert {d.ownership for d in catalog.data_centres} == {"owned", "partner"}
    h100 = catalog.model("h100-sxm")
    assert (h100.bf16_tflops, h100.memory_gb, h100.nvlink) == (Decimal("989.4"), 80, True)
    assert catalog.model("4090").nvlink is False
    h100_nodes = [n for n in catalog.nodes if n.gpu_model == "H100"]
    assert all(
        n.gpu_count == 8 and n.ib_rails == 8 and n.ib_gbps_per_rail == 200 for n in h100_nodes
    )
    assert len({n.ib_leaf for n in h100_nodes}) > 1
    assert catalog.prices.on_demand("H100", "bj1") == Money.parse("1.90")
    assert catalog.prices.on_demand("A800", "bj1") == Money.parse("1.20")
    assert catalog.prices.on_demand("RTX4090", "wh1") == Money.parse("0.60")
    assert catalog.prices.monthly("H100", "wh1") == Money.parse("1.235")  # 35% off
    with pytest.raises(InvalidInput, match="unknown GPU model"):
        catalog.model("B200")


def _write(tmp_path: Path, raw: dict) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_fleet_file_errors_name_the_problem(tmp_path: Path) -> None:
    raw = yaml.safe_load(default_fleet_text())
    raw["prices"][0]["gpu_model"] = "B200"
    with pytest.raises(InvalidInput, match="unknown gpu_model B200"):
        load_catalog(_write(tmp_path, raw))
    raw = yaml.safe_load(default_fleet_text())
    raw["prices"][0]["on_demand"] = "-1"
    with pytest.raises(InvalidInput, match="positive"):
        load_catalog(_write(tmp_path, raw))
    raw = yaml.safe_load(default_fleet_text())
    raw["data_centres"][0]["surprise"] = 1
    with pytest.raises(InvalidInput, match="surprise"):
        load_catalog(_write(tmp_path, raw))
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpu_models: [")
    with pytest.raises(InvalidInput, match="not valid YAML"):
        load_catalog(bad)
    with pytest.raises(InvalidInput, match="cannot read"):
        load_catalog(tmp_path / "missing.yaml")
