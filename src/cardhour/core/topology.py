"""The physical fleet: data centres, nodes, NVLink/PCIe inside a node, InfiniBand leaf/spine."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DataCentre:
    id: str
    name: str
    ownership: str  # "owned" | "partner"
    region: str


@dataclass(frozen=True)
class NodeSpec:
    """One GPU server. All GPUs of a node are one model and one in-node domain."""

    id: str
    data_centre: str
    gpu_model: str  # GpuModel.id
    gpu_count: int
    cpus: int
    memory_gb: int
    ib_leaf: str | None  # None: no InfiniBand (e.g. PCIe consumer-card nodes)
    ib_spine: str | None
    ib_rails: int
    ib_gbps_per_rail: int
