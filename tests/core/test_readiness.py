"""`core.readiness`: gate thresholds and the topology check against the fleet file."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from pathlib import Path

from cardhour.core import readiness
from cardhour.core.gpus import GpuModel
from cardhour.core.parsers import hwtopo
from cardhour.core.topology import NodeSpec

FIXTURES = Path(__file__).parents[1] / "fixtures" / "topology"
H100 = GpuModel("H100", "H100 SXM 80GB", Decimal("989.4"), 80, "NVLink4", 900, True)
PCIE = GpuModel("H100P", "H100 PCIe", Decimal("756"), 80, "PCIe Gen5", 128, False)
NODE = NodeSpec("bj1-h100-01", "bj1", "H100", 8, 192, 2048, "leaf-1", "spine-1", 8, 400)


def test_thresholds() -> None:
    assert readiness.node_threshold(H100, 8, 8) == 234  # 26% of 900
    assert readiness.node_threshold(replace(H100, nccl_gate_gbps=Decimal(235)), 8, 8) == 235
    # 4 of 8 GPUs: busbw factor 2·3/4 against 2·7/8
    assert readiness.node_threshold(H100, 4, 8) == Decimal("200.6")
    assert readiness.fabric_threshold([NODE, NODE]) == Decimal("240.0")  # 0.6 × 8 × 400 / 8
    assert readiness.fabric_threshold([NODE, replace(NODE, ib_leaf=None)]) is None


def test_a_healthy_hgx_node_matches_its_fleet_entry() -> None:
    topo = hwtopo.parse_topo((FIXTURES / "nvidia-smi-topo-8xH100-SXM.txt").read_text())
    ib = hwtopo.parse_ibstat((FIXTURES / "ibstat-8xNDR.txt").read_text())
    check = readiness.check_topology(NODE, H100, topo, ib, multi_node=True)
    assert check.ok and check.summary == "8 GPUs, NV18 all-to-all, 8 InfiniBand ports up"


def test_problems_are_named() -> None:
    topo = hwtopo.parse_topo((FIXTURES / "nvidia-smi-topo-8xH100-PCIe.txt").read_text())
    ib = hwtopo.parse_ibstat((FIXTURES / "ibstat-8xNDR-one-down-one-slow.txt").read_text())
    check = readiness.check_topology(NODE, H100, topo, ib, multi_node=True)
    assert not check.ok
    assert check.problems == (
        "NVLink split into 4 domains: [[0, 1], [2, 3], [4, 5], [6, 7]]",
        "mlx5_3 port 1 is Down (Polling)",
        "mlx5_5 port 1 runs at 200 Gb/s, expected 400",
    )
    # one node on its own: InfiniBand is not needed, and a PCIe model has no NVLink to check
    alone = readiness.check_topology(NODE, PCIE, topo, ib, multi_node=False)
    assert alone.ok and "NVLink pairs" in alone.summary
