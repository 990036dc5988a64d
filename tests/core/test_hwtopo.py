"""`core.hwtopo`: nvidia-smi topo -m and ibstat, on samples of an 8 × H100 SXM (HGX) node and an
8 × H100 PCIe node with NVLink bridge pairs (tests/fixtures/topology: written in the tools'
formats, tab-separated as nvidia-smi prints them, not captured on hardware here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cardhour.core.errors import InvalidInput
from cardhour.core.parsers import hwtopo

FIXTURES = Path(__file__).parents[1] / "fixtures" / "topology"


def load(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_hgx_h100_is_one_nvlink_domain_with_a_nic_per_gpu() -> None:
    topo = hwtopo.parse_topo(load("nvidia-smi-topo-8xH100-SXM.txt"))
    assert topo.gpus == 8 and topo.all_to_all_nvlink and topo.min_nvlinks == 18
    assert topo.nvlink_domains() == [list(range(8))]
    assert topo.nics == tuple(f"mlx5_{k}" for k in range(10))  # through the NIC Legend
    assert [topo.nearest_nic(g) for g in range(8)] == [f"mlx5_{g}" for g in range(8)]
    assert topo.numa == (0, 0, 0, 0, 1, 1, 1, 1)


def test_pcie_h100_has_bridge_pairs_and_shares_nics() -> None:
    topo = hwtopo.parse_topo(load("nvidia-smi-topo-8xH100-PCIe.txt"))
    assert not topo.all_to_all_nvlink and topo.min_nvlinks == 0
    assert topo.nvlink_domains() == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert topo.nvlinks(0, 1) == 12 and topo.nvlinks(0, 2) == 0
    assert topo.links[0][2] == "NODE" and topo.links[0][4] == "SYS"
    assert [topo.nearest_nic(g) for g in range(8)] == ["mlx5_0"] * 4 + ["mlx5_1"] * 4


def test_older_drivers_name_nics_in_the_header() -> None:
    text = load("nvidia-smi-topo-8xH100-PCIe.txt").split("\nLegend")[0]
    text = text.replace("NIC0", "mlx5_0").replace("NIC1", "mlx5_1").replace("\tGPU NUMA ID", "")
    text = text.replace("\t\tN/A", "")
    topo = hwtopo.parse_topo(text)
    assert topo.nics == ("mlx5_0", "mlx5_1") and topo.numa[7] == 1


def test_a_lost_nvlink_shows_as_fewer_links() -> None:
    text = load("nvidia-smi-topo-8xH100-SXM.txt").splitlines()
    for row in (1, 3):  # GPU0-GPU2 with two NVLinks down, both directions
        cells = text[row].split("\t")
        cells[3 if row == 1 else 1] = "NV16"
        text[row] = "\t".join(cells)
    topo = hwtopo.parse_topo("\n".join(text))
    assert topo.all_to_all_nvlink and topo.min_nvlinks == 16


def test_a_tty_underlined_header_and_indented_copies_read_the_same() -> None:
    # two shapes seen in public captures of 8 × H100 SXM nodes: nvidia-smi underlines the header
    # when it writes to a terminal (srun --pty, ssh -t), and tools that embed the matrix in their
    # reports indent it with spaces, losing the header's leading tab
    plain = load("nvidia-smi-topo-8xH100-SXM.txt")
    lines = plain.splitlines()
    underlined = "\n".join(["\t\x1b[4m" + lines[0].lstrip("\t") + "\x1b[0m", *lines[1:]])
    indented = "\n".join(
        "    " + line.lstrip("\t") if i == 0 else "    " + line for i, line in enumerate(lines)
    )
    expected = hwtopo.parse_topo(plain)
    assert hwtopo.parse_topo(underlined) == expected
    assert hwtopo.parse_topo(indented) == expected


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda t: "nvidia-smi: command not found", "no GPU matrix"),
        (lambda t: t.replace("GPU1\tNV18\t X \tNV18", "GPU1\tSYS\t X \tNV18", 1), "not symmetric"),
        (lambda t: t.replace("NV18", "NVX", 1), "unknown link"),
    ],
)
def test_bad_topo_output(mangle: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        hwtopo.parse_topo(mangle(load("nvidia-smi-topo-8xH100-SXM.txt")))  # type: ignore[operator]


def test_ibstat_of_a_healthy_ndr_node() -> None:
    status = hwtopo.parse_ibstat(load("ibstat-8xNDR.txt"))
    assert len(status.ports) == 10 and len(status.infiniband) == 8
    assert {p.rate_gbps for p in status.infiniband} == {400}
    assert status.problems(expected_ports=8, expected_rate_gbps=400) == []
    ethernet = [p for p in status.ports if p.link_layer == "Ethernet"]
    assert [(p.adapter, p.up) for p in ethernet] == [("mlx5_8", True), ("mlx5_9", False)]


def test_ibstat_names_each_problem() -> None:
    status = hwtopo.parse_ibstat(load("ibstat-8xNDR-one-down-one-slow.txt"))
    assert status.problems(expected_ports=8, expected_rate_gbps=400) == [
        "mlx5_3 port 1 is Down (Polling)",
        "mlx5_5 port 1 runs at 200 Gb/s, expected 400",
    ]
    assert hwtopo.parse_ibstat(load("ibstat-8xNDR.txt")).problems(9, 400) == [
        "8 InfiniBand ports, expected 9"
    ]


def test_ibstat_without_adapters_is_an_error() -> None:
    with pytest.raises(InvalidInput, match="no adapter"):
        hwtopo.parse_ibstat("ibstat: command not found\n")


def test_ibstat_shapes_seen_in_public_captures() -> None:
    healthy = load("ibstat-8xNDR.txt")
    # FDR10 links print `Rate: 40 (FDR10)`, 1x SDR and soft-RoCE `Rate: 2.5`: one odd port
    # must not lose the node's other ports
    odd = healthy.replace("Rate: 400", "Rate: 40 (FDR10)", 1).replace("Rate: 400", "Rate: 2.5", 1)
    rates = [p.rate_gbps for p in hwtopo.parse_ibstat(odd).infiniband]
    assert rates[:3] == [40, 2.5, 400] and len(rates) == 8
    # `ibstat CA PORT` prints `CA: 'mlx5_0'`
    one = hwtopo.parse_ibstat(healthy.replace("CA 'mlx5_0'", "CA: 'mlx5_0'"))
    assert one.ports[0].adapter == "mlx5_0" and len(one.ports) == 10
    # ibstat stops at a device it cannot read: what it printed before is not the whole node
    cut = healthy + "ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed\n"
    with pytest.raises(InvalidInput, match="ibstat failed: ibpanic"):
        hwtopo.parse_ibstat(cut)
