"""GPU models and their specs (figures from shared/docs/FACTS.md), and the `MODEL:COUNT` syntax."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from cardhour.core.errors import InvalidInput


@dataclass(frozen=True)
class GpuModel:
    """One GPU model as the fleet file declares it."""

    id: str  # short key users type: "H100"
    name: str  # "H100 SXM 80GB"
    bf16_tflops: Decimal  # dense BF16 peak
    memory_gb: int
    in_node_link: str  # "NVLink4", "PCIe Gen4"
    in_node_gbps: int  # GB/s per GPU inside the node
    nvlink: bool
    aliases: tuple[str, ...] = ()
    nccl_gate_gbps: Decimal | None = None  # None: `readiness.node_threshold` derives it

    def matches(self, query: str) -> bool:
        q = _norm(query)
        return q in {_norm(self.id), _norm(self.name), *(_norm(a) for a in self.aliases)}


def _norm(text: str) -> str:
    return re.sub(r"[\s_\-]", "", text).lower()


@dataclass(frozen=True)
class GpuRequest:
    """`H100:8` → model query "H100", 8 GPUs."""

    model: str
    count: int


_REQUEST = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9 _\-]{0,40}?)\s*(?::\s*(\d{1,6}))?\s*")
MAX_GPUS_PER_REQUEST = 1024


def parse_gpu_request(text: str, default_count: int = 1) -> GpuRequest:
    """Parse `MODEL[:COUNT]`; raises InvalidInput with one clear line on anything else."""
    match = _REQUEST.fullmatch(text or "")
    if not match:
        raise InvalidInput(f"bad GPU request {text!r}: expected MODEL[:COUNT], e.g. H100:8")
    count = int(match.group(2)) if match.group(2) else default_count
    return GpuRequest(match.group(1), validate_gpu_count(count))


def validate_gpu_count(count: int) -> int:
    if not 1 <= count <= MAX_GPUS_PER_REQUEST:
        raise InvalidInput(f"GPU count must be between 1 and {MAX_GPUS_PER_REQUEST}, got {count}")
    return count


def resolve_model(models: list[GpuModel], query: str) -> GpuModel:
    for model in models:
        if model.matches(query):
            return model
    known = ", ".join(m.id for m in models)
    raise InvalidInput(f"unknown GPU model {query!r}; known models: {known}")
