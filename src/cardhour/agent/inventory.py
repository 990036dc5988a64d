"""What the agent reports about its server: GPUs (`nvidia-smi --query-gpu`), in-node links
(`nvidia-smi topo -m`), InfiniBand (`ibstat`, where installed), CPUs, memory and disk.

Stand-in GPUs (test machines only, `AgentSettings.standin_gpus`): no nvidia-smi runs; the GPUs
are `MODEL:COUNT` of the demo catalog's models, with UUIDs derived from the host's name, and
their `topo -m` is the modelled one (`core.readiness.modelled`), in nvidia-smi's format. The
report says `standin: true` wherever it goes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cardhour.core.errors import InvalidInput
from cardhour.core.gpus import parse_gpu_request
from cardhour.core.parsers import nvidia_smi
from cardhour.core.readiness import modelled
from cardhour.core.topology import NodeSpec
from cardhour.settings import load_catalog

#: what nvidia-smi calls the demo catalog's models (its `name` column)
STANDIN_NAMES = {
    "H100": "NVIDIA H100 80GB HBM3",
    "A800": "NVIDIA A800-SXM4-80GB",
    "RTX4090": "NVIDIA GeForce RTX 4090",
}


@dataclass(frozen=True)
class Inventory:
    report: dict[str, Any]  # as `AgentReport.inventory`
    devices: dict[int, str]  # GPU index -> the CDI device name a container gets


def _run(argv: list[str], timeout: int = 30) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InvalidInput(f"{argv[0]} failed: {exc}") from exc
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise InvalidInput(f"{' '.join(argv)} exited {done.returncode}: {last[0]}")
    return done.stdout


def _machine(state_dir: Path) -> dict[str, Any]:
    memory_kb = 0
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                memory_kb = int(line.split()[1])
    state_dir.mkdir(parents=True, exist_ok=True)
    return {
        "cpus": os.cpu_count() or 1,
        "memory_mb": memory_kb // 1024,
        # the size, not what is free: a figure that moved with every file written would be
        # a new inventory at every read (the control plane re-reads what changes)
        "disk_gb": shutil.disk_usage(state_dir).total // 2**30,
    }


def real(state_dir: Path) -> Inventory:
    """The server's own GPUs. InvalidInput when nvidia-smi is missing or fails."""
    gpus = nvidia_smi.parse_gpus(_run(nvidia_smi.COMMAND))
    topology = _run(["nvidia-smi", "topo", "-m"])
    ibstat = _run(["ibstat"]) if shutil.which("ibstat") else None
    report = {
        "gpus": [g.as_dict() for g in gpus],
        "topology": topology,
        "ibstat": ibstat,
        **_machine(state_dir),
    }
    return Inventory(report, {g.index: f"nvidia.com/gpu={g.uuid}" for g in gpus})


def standin_gpus(request: str, host: str) -> tuple[str, list[nvidia_smi.Gpu]]:
    """(model id, GPUs) of a stand-in `MODEL:COUNT`; InvalidInput for a model the demo catalog
    lacks."""
    catalog = load_catalog()
    parsed = parse_gpu_request(request)
    model = catalog.model(parsed.model)
    name = STANDIN_NAMES.get(model.id, f"NVIDIA {model.name}")
    gpus = [
        nvidia_smi.Gpu(
            i,
            f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{i}.{host}.standin.cardhour')}",
            name,
            model.memory_gb * 1024,
            f"00000000:{0x18 + 16 * i:02X}:00.0",
        )
        for i in range(parsed.count)
    ]
    return model.id, gpus


def standin(request: str, host: str, state_dir: Path, kind: str) -> Inventory:
    """Stand-in GPUs as an inventory; `kind`: the CDI kind their devices are under."""
    model_id, gpus = standin_gpus(request, host)
    catalog = load_catalog()
    model = catalog.model_by_id(model_id)
    machine = _machine(state_dir)
    # InfiniBand as the demo fleet's nodes of the model have it (H100: 8 rails of 200 Gb/s)
    like = next((n for n in catalog.nodes if n.gpu_model == model.id), None)
    rails, gbps = (like.ib_rails, like.ib_gbps_per_rail) if like is not None else (0, 0)
    node = NodeSpec(host, "-", model.id, len(gpus), machine["cpus"], 0, None, None, rails, gbps)
    report = {
        "gpus": [g.as_dict() for g in gpus],
        "topology": modelled.nvidia_smi_topo(node, model),
        "ibstat": modelled.ibstat(node) if rails else None,
        **machine,
    }
    return Inventory(report, {g.index: f"{kind}={g.index}" for g in gpus})
