"""What simulated nodes and stand-in GPUs print for the readiness gate, in the real tools'
formats: `nvidia-smi topo -m`, `ibstat` and nccl-tests' `all_reduce_perf`. The figures are
modelled, not measured (FACTS.md: about 478 GB/s busbw on 8 × H100 SXM with NVLS, about 94%
of the NICs' line rate across nodes); the parsers in `core` read these exactly as they read a
real node's output.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from cardhour.core import readiness
from cardhour.core.gpus import GpuModel
from cardhour.core.topology import NodeSpec

DEGRADED_FRACTION = 0.35  # what a node with a bad NVSwitch or GPU reaches

_LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""  # noqa: E501 - nvidia-smi's own lines


def nvidia_smi_topo(spec: NodeSpec, model: GpuModel, split_nvlink: bool = False) -> str:
    """`nvidia-smi topo -m` of the node: NV18 between every GPU pair for an NVLink model (two
    halves without NVLink between them when `split_nvlink`), PCIe paths otherwise; one NIC per
    IB rail, each behind the PCIe switch of GPU i (rail i), NUMA by halves."""
    n, rails = spec.gpu_count, spec.ib_rails
    half = max(n // 2, 1)
    cpus = max(spec.cpus // 2, 1)

    def socket(i: int) -> int:
        return 0 if i < half else 1

    def gpu_link(i: int, j: int) -> str:
        if i == j:
            return " X "
        if model.nvlink and not (split_nvlink and socket(i) != socket(j)):
            return "NV18"
        return "NODE" if socket(i) == socket(j) else "SYS"

    def nic_path(i: int, k: int) -> str:
        if k == i:
            return "PIX"
        return "NODE" if socket(i) == socket(k * n // max(rails, 1)) else "SYS"

    header = [f"GPU{i}" for i in range(n)] + [f"NIC{k}" for k in range(rails)]
    lines = ["\t" + "\t".join([*header, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])]
    for i in range(n):
        cells = [gpu_link(i, j) for j in range(n)] + [nic_path(i, k) for k in range(rails)]
        affinity = f"{socket(i) * cpus}-{socket(i) * cpus + cpus - 1}"
        lines.append(f"GPU{i}\t" + "\t".join(cells) + f"\t{affinity}\t{socket(i)}\t\tN/A")
    for k in range(rails):
        cells = [nic_path(i, k) for i in range(n)]
        cells += [" X " if k == m else "SYS" for m in range(rails)]
        lines.append(f"NIC{k}\t" + "\t".join(cells))
    legend = [f"  NIC{k}: mlx5_{k}" for k in range(rails)]
    nic_legend = "\nNIC Legend:\n\n" + "\n".join(legend) + "\n" if rails else ""
    return "\n".join(lines) + "\n" + _LEGEND + nic_legend


def ibstat(spec: NodeSpec, down_rails: Sequence[int] = ()) -> str:
    """`ibstat` of the node: one ConnectX adapter per rail, `down_rails` not linked."""
    blocks = []
    for k in range(spec.ib_rails):
        down = k in down_rails
        guid = f"0x{zlib.crc32(spec.id.encode()) << 16 | k:016x}"
        blocks.append(
            "\n".join(
                [
                    f"CA 'mlx5_{k}'",
                    "\tCA type: MT4129",
                    "\tNumber of ports: 1",
                    "\tFirmware version: 28.39.1002",
                    "\tHardware version: 0",
                    f"\tNode GUID: {guid}",
                    f"\tSystem image GUID: {guid}",
                    "\tPort 1:",
                    f"\t\tState: {'Down' if down else 'Active'}",
                    f"\t\tPhysical state: {'Polling' if down else 'LinkUp'}",
                    f"\t\tRate: {10 if down else spec.ib_gbps_per_rail}",
                    f"\t\tBase lid: {65535 if down else 100 + k}",
                    "\t\tLMC: 0",
                    "\t\tSM lid: 1",
                    "\t\tCapability mask: 0xa751e848",
                    f"\t\tPort GUID: {guid}",
                    "\t\tLink layer: InfiniBand",
                ]
            )
        )
    return "\n".join(blocks) + ("\n" if blocks else "")


def node_busbw(model: GpuModel, degraded: bool = False) -> float:
    """The modelled large-message busbw of one node's all-reduce, GB/s (what a healthy node
    reaches, `core.readiness.node_busbw`, or a degraded one)."""
    return readiness.node_busbw(model) * (DEGRADED_FRACTION if degraded else 1.0)


def fabric_busbw(specs: Sequence[NodeSpec]) -> float:
    """The modelled busbw of an all-reduce across nodes: the slowest node's NICs."""
    return readiness.fabric_busbw(list(specs)) or 0.0


def all_reduce_perf(
    hosts: Sequence[str], gpus_per_host: int, gpu_name: str, peak_busbw: float
) -> str:
    """nccl-tests `all_reduce_perf -b 8 -e 8G -f 2` over `hosts`, reaching `peak_busbw`."""
    ranks = len(hosts) * gpus_per_host
    factor = 2 * (ranks - 1) / ranks if ranks > 1 else 1.0
    latency_us = 25.0 + 15.0 * (len(hosts) - 1)
    lines = [
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for rank in range(ranks):
        host, device = hosts[rank // gpus_per_host], rank % gpus_per_host
        lines.append(
            f"#  Rank {rank:2d} Group  0 Pid {40000 + rank:6d} on {host:>10s} device {device:2d} "
            f"[0x{0x18 + 16 * device:02x}] {gpu_name}"
        )
    lines += [
        "#",
        "#" + " " * 62 + "out-of-place                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)      "
        "      (us)  (GB/s)  (GB/s)       ",
    ]
    peak_algbw = peak_busbw / factor
    size, seen = 8, []
    while size <= 8 << 30:
        time_us = latency_us + size / (peak_algbw * 1e3)
        algbw = size / (time_us * 1e3)
        busbw = algbw * factor
        seen += [busbw, busbw]
        shown = f"{time_us:7.2f}" if time_us < 1e4 else f"{time_us:7.0f}"
        cells = f"{shown} {algbw:7.2f} {busbw:7.2f}      0"
        lines.append(f"{size:12d}  {size // 4:12d}     float     sum      -1  {cells}  {cells}")
        size *= 2
    lines += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {sum(seen) / len(seen):.4f} ",
        "#",
        "",
    ]
    return "\n".join(lines)
