"""The simulated nodes' readiness reports are in the real tools' formats: the parsers that read
captured output read them the same way, and each fault shows where a real one would."""

from __future__ import annotations

from decimal import Decimal

from cardhour.core import readiness
from cardhour.core.gpus import GpuModel
from cardhour.core.parsers import hwtopo, nccl_tests
from cardhour.core.readiness import modelled as reports
from cardhour.core.topology import NodeSpec

H100 = GpuModel("H100", "H100 SXM 80GB", Decimal("989.4"), 80, "NVLink4", 900, True)
RTX = GpuModel("RTX4090", "RTX 4090 24GB", Decimal("165"), 24, "PCIe Gen4", 32, False)
NODE = NodeSpec("bj1-h100-01", "bj1", "H100", 8, 192, 2048, "leaf-1", "spine-1", 8, 400)
PCIE = NodeSpec("wh1-4090-01", "wh1", "RTX4090", 8, 64, 512, None, None, 0, 0)


def test_topology_reports_parse_and_match_the_node() -> None:
    topo = hwtopo.parse_topo(reports.nvidia_smi_topo(NODE, H100))
    ib = hwtopo.parse_ibstat(reports.ibstat(NODE))
    assert topo.all_to_all_nvlink and topo.min_nvlinks == 18
    assert topo.nics == tuple(f"mlx5_{k}" for k in range(8))
    assert [topo.nearest_nic(g) for g in range(8)] == [f"mlx5_{g}" for g in range(8)]
    assert readiness.check_topology(NODE, H100, topo, ib, multi_node=True).ok

    pcie = hwtopo.parse_topo(reports.nvidia_smi_topo(PCIE, RTX))
    assert pcie.nics == () and pcie.nvlink_domains() == [[g] for g in range(8)]
    assert readiness.check_topology(PCIE, RTX, pcie, None, multi_node=False).ok


def test_faults_show_where_a_real_node_would_show_them() -> None:
    split = hwtopo.parse_topo(reports.nvidia_smi_topo(NODE, H100, split_nvlink=True))
    assert split.nvlink_domains() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    down = hwtopo.parse_ibstat(reports.ibstat(NODE, down_rails=[0]))
    assert down.problems(8, 400) == ["mlx5_0 port 1 is Down (Polling)"]


def test_all_reduce_output_parses_and_gates() -> None:
    healthy = nccl_tests.parse(
        reports.all_reduce_perf(["n1"], 8, "NVIDIA H100", reports.node_busbw(H100))
    )
    assert healthy.ranks == 8 and nccl_tests.gate(healthy, 235).passed
    slow = nccl_tests.parse(
        reports.all_reduce_perf(["n1"], 8, "NVIDIA H100", reports.node_busbw(H100, degraded=True))
    )
    assert not nccl_tests.gate(slow, 235).passed
    two = nccl_tests.parse(
        reports.all_reduce_perf(["n1", "n2"], 8, "NVIDIA H100", reports.fabric_busbw([NODE, NODE]))
    )
    assert two.hosts == ("n1", "n2") and two.large_busbw is not None
    assert 370 < two.large_busbw < 376  # 94% of 8 × 400 Gb/s
