"""The readiness gate: the stages an instance goes through before it is billable, and the checks
of the last two. Pure.

Stages, in order: `allocated` (the scheduler placed it), `booting` (the backend brings it up),
`keys_injected` (the owner's SSH keys are on every node), `topology_detected` (`nvidia-smi topo
-m` and `ibstat` read on every node and compared with what the fleet file says the node is),
`nccl_gate` (nccl-tests all_reduce_perf on each node, and across the nodes of a multi-node
instance), `ready`. An instance turns `running` — and billable — only at `ready`.

Thresholds, on the large-message busbw of `core.nccl_tests`:
- on one node: the GPU model's `nccl_gate_gbps`, else 26% of its `in_node_gbps` (235 GB/s for
  H100's 900), scaled by the GPUs tested over the node's GPUs for a partial node (an all-reduce
  over k < n GPUs moves less per GPU);
- across nodes: `FABRIC_FRACTION` of the node's InfiniBand line rate (rails × Gb/s ÷ 8): a
  healthy fabric delivers about 94% of it (FACTS.md: 46-48 GB/s per 400 Gb/s NIC).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from cardhour.core.gpus import GpuModel
from cardhour.core.parsers.hwtopo import GpuTopology, IbStatus
from cardhour.core.topology import NodeSpec

STAGES = ("allocated", "booting", "keys_injected", "topology_detected", "nccl_gate", "ready")
DEFAULT_NODE_FRACTION = Decimal("0.26")
FABRIC_FRACTION = Decimal("0.6")


def node_threshold(model: GpuModel, gpus_tested: int, gpus_per_node: int) -> Decimal:
    """GB/s that all_reduce_perf over `gpus_tested` GPUs of one node must reach."""
    full = model.nccl_gate_gbps or (DEFAULT_NODE_FRACTION * model.in_node_gbps).quantize(Decimal(1))
    if gpus_tested >= gpus_per_node:
        return full
    # busbw = algbw · 2(k−1)/k: with fewer ranks the same links carry less bus traffic
    scale = Decimal(2 * (gpus_tested - 1) * gpus_per_node) / (gpus_tested * 2 * (gpus_per_node - 1))
    return (full * scale).quantize(Decimal("0.1"))


def fabric_threshold(nodes: list[NodeSpec]) -> Decimal | None:
    """GB/s an all-reduce across `nodes` must reach; None when any has no InfiniBand."""
    if any(n.ib_leaf is None or n.ib_rails <= 0 for n in nodes):
        return None
    line_rate = min(Decimal(n.ib_rails * n.ib_gbps_per_rail) / 8 for n in nodes)
    return (FABRIC_FRACTION * line_rate).quantize(Decimal("0.1"))


@dataclass(frozen=True)
class TopologyCheck:
    ok: bool
    summary: str  # one line: what was found
    problems: tuple[str, ...]


def check_topology(
    spec: NodeSpec, model: GpuModel, topo: GpuTopology, ib: IbStatus | None, multi_node: bool
) -> TopologyCheck:
    """Compare what a node reports with what the fleet file says it is: its GPU count, one
    NVLink domain for an NVLink model, and — when the instance spans nodes — its InfiniBand
    rails up at their rated speed."""
    problems = []
    if topo.gpus != spec.gpu_count:
        problems.append(f"{topo.gpus} GPUs visible, expected {spec.gpu_count}")
    domains = topo.nvlink_domains()
    if model.nvlink and len(domains) != 1:
        problems.append(f"NVLink split into {len(domains)} domains: {domains}")
    ports = 0
    if ib is not None:
        ports = len([p for p in ib.infiniband if p.up])
        if multi_node and spec.ib_rails:
            problems.extend(ib.problems(spec.ib_rails, spec.ib_gbps_per_rail))
    elif multi_node and spec.ib_rails:
        problems.append("no ibstat output: InfiniBand not visible")
    links = f"NV{topo.min_nvlinks} all-to-all" if topo.all_to_all_nvlink else "PCIe"
    if not topo.all_to_all_nvlink and len(domains) < topo.gpus:
        links = f"NVLink pairs {domains}"
    summary = f"{topo.gpus} GPUs, {links}, {ports} InfiniBand ports up"
    return TopologyCheck(not problems, summary, tuple(problems))


# What a healthy placement reaches (FACTS.md): 8 × H100 SXM all-reduce about 476-480 GB/s busbw
# with NVLS (53% of its 900 GB/s NVLink), PCIe nodes taken at 70% of their link, and across
# nodes about 94% of the NICs' line rate (46-48 GB/s per 400 Gb/s NIC).
NVLINK_BUSBW_FRACTION = 0.53
PCIE_BUSBW_FRACTION = 0.7
FABRIC_EFFICIENCY = 0.94


def node_busbw(model: GpuModel) -> float:
    """Expected large-message busbw of an all-reduce over one full node, GB/s."""
    fraction = NVLINK_BUSBW_FRACTION if model.nvlink else PCIE_BUSBW_FRACTION
    return model.in_node_gbps * fraction


def fabric_busbw(nodes: list[NodeSpec]) -> float | None:
    """Expected busbw of an all-reduce across `nodes` (the slowest node's NICs); None without
    InfiniBand."""
    if any(n.ib_leaf is None or n.ib_rails <= 0 for n in nodes):
        return None
    return min(n.ib_rails * n.ib_gbps_per_rail / 8 for n in nodes) * FABRIC_EFFICIENCY


def expected_busbw(model: GpuModel, gpus_per_node: int, nodes: list[NodeSpec]) -> float | None:
    """What all_reduce_perf should show for this placement, GB/s (None for a single GPU):
    inside one node, scaled like the gate's threshold for a part of it; across several, the
    lesser of the node and the fabric."""
    if not nodes or (len(nodes) == 1 and gpus_per_node < 2):
        return None
    per_node = node_busbw(model)
    full = nodes[0].gpu_count
    if len(nodes) == 1 and gpus_per_node < full:
        per_node *= ((gpus_per_node - 1) / gpus_per_node) / ((full - 1) / full)
    if len(nodes) == 1:
        return round(per_node, 1)
    fabric = fabric_busbw(nodes)
    return round(min(per_node, fabric) if fabric is not None else per_node, 1)
