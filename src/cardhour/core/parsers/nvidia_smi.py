"""`nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id --format=csv,noheader` (the
agent's GPU inventory). Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cardhour.core.errors import InvalidInput

QUERY = "index,uuid,name,memory.total,pci.bus_id"
COMMAND = ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader"]


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str  # GPU-xxxxxxxx-…
    name: str  # "NVIDIA H100 80GB HBM3"
    memory_mib: int
    pci_bus_id: str

    def as_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "uuid": self.uuid,
            "name": self.name,
            "memory_mib": self.memory_mib,
            "pci_bus_id": self.pci_bus_id,
        }


def parse_gpus(text: str) -> list[Gpu]:
    """One GPU per non-empty line, by index. InvalidInput on a line that is not five fields, a
    memory that is not `<n> MiB`, or an index seen twice."""
    gpus: dict[int, Gpu] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 5:
            raise InvalidInput(f"nvidia-smi: expected {QUERY}, got {line.strip()!r}")
        index, uuid, name, memory, bus = fields
        found = re.fullmatch(r"(\d+)\s*MiB", memory)
        if not index.isdigit() or found is None:
            raise InvalidInput(f"nvidia-smi: cannot read {line.strip()!r}")
        if int(index) in gpus:
            raise InvalidInput(f"nvidia-smi: GPU {index} listed twice")
        gpus[int(index)] = Gpu(int(index), uuid, name, int(found.group(1)), bus)
    return [gpus[i] for i in sorted(gpus)]
