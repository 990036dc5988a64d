"""GPUs (dense BF16 peak), the default MFU by GPU and scale, goodput, and the MFU ceiling.

Figures from shared/docs/FACTS.md; each default carries the basis the output prints with it, so a
user sees whether a number was measured somewhere or is our assumption.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from cardhour.core.errors import InvalidInput
from cardhour.core.gpus import GpuModel, resolve_model

#: Dense BF16 peak TFLOP/s (no sparsity), memory and in-node link: FACTS.md "GPUs".
GPUS: tuple[GpuModel, ...] = (
    GpuModel("H100", "H100 SXM 80GB", Decimal("989.4"), 80, "NVLink4", 900, True,
             ("H100-SXM", "H100-SXM-80GB", "H100-80GB")),
    GpuModel("H100-PCIe", "H100 PCIe 80GB", Decimal("756"), 80, "PCIe Gen5", 64, False),
    GpuModel("H200", "H200 141GB", Decimal("989"), 141, "NVLink4", 900, True, ("H200-SXM",)),
    GpuModel("H800", "H800 80GB", Decimal("989"), 80, "NVLink (400 GB/s)", 400, True),
    GpuModel("H20", "H20 96GB", Decimal("148"), 96, "NVLink4", 900, True),
    GpuModel("A100", "A100 80GB", Decimal("312"), 80, "NVLink3", 600, True,
             ("A100-80GB", "A100-SXM")),
    GpuModel("A800", "A800 80GB", Decimal("312"), 80, "NVLink3 (400 GB/s)", 400, True,
             ("A800-80GB",)),
    GpuModel("L40S", "L40S 48GB", Decimal("362"), 48, "PCIe Gen4", 32, False),
    GpuModel("RTX4090", "RTX 4090 24GB", Decimal("165"), 24, "PCIe Gen4", 32, False,
             ("4090", "RTX-4090")),
)  # fmt: skip

PEAK_SOURCE = "dense BF16 peak, FACTS.md (NVIDIA datasheets and spec listings)"

#: The share of wall-clock time spent training rather than restarting, evaluating or waiting.
DEFAULT_GOODPUT = Decimal("0.9")
GOODPUT_BASIS = "Llama 3.1 paper: more than 90% effective training time on 16k H100s"

#: No dense BF16 training run has been published anywhere near this MFU (the best are in the
#: 40s and low 50s); a claim that needs more is not aggressive but impossible today.
MFU_CEILING = Decimal("0.6")
CEILING_BASIS = (
    "published dense BF16 runs reach 0.38-0.43 (Llama 3.1, 16k H100), up to 0.47 "
    "(Megatron-LM on H100); a step also spends time outside matmuls (norms, softmax, "
    "optimizer, communication)"
)


@dataclass(frozen=True)
class MfuDefault:
    """MFU for GPUs of one interconnect class up to `max_gpus` GPUs."""

    nvlink: bool
    max_gpus: int
    mfu: Decimal
    basis: str


_LLAMA = "Llama 3.1 paper: 38-43% BF16 MFU (400-430 TFLOP/s per H100) on 8,192-16,384 GPUs"
#: First row of the GPU's class whose `max_gpus` covers the job wins.
MFU_DEFAULTS: tuple[MfuDefault, ...] = (
    MfuDefault(True, 8_192, Decimal("0.40"), _LLAMA + "; 0.40 is the low end of tuned runs"),
    MfuDefault(True, 10**9, Decimal("0.38"), _LLAMA + "; 0.38 at 16,384 GPUs"),
    MfuDefault(False, 8, Decimal("0.30"),
               "assumption: no NVLink, gradients cross PCIe (no published measurement)"),
    MfuDefault(False, 10**9, Decimal("0.20"),
               "assumption: no NVLink and, in the demo fleet, no InfiniBand between nodes"),
)  # fmt: skip


def resolve_gpu(query: str, fleet_models: list[GpuModel] | None = None) -> GpuModel:
    """A GPU from the table above, else from the fleet file (its declared BF16 peak).

    Raises InvalidInput naming the known models when neither has it.
    """
    try:
        return resolve_model(list(GPUS), query)
    except InvalidInput:
        if fleet_models:
            try:
                return resolve_model(fleet_models, query)
            except InvalidInput:
                pass
    extra = [m.id for m in fleet_models or [] if not any(m.id == g.id for g in GPUS)]
    known = ", ".join([g.id for g in GPUS] + extra)
    raise InvalidInput(f"unknown GPU model {query!r}; known models: {known}")


def default_mfu(gpu: GpuModel, gpus: int) -> MfuDefault:
    """The MFU default for `gpus` cards of this model (by its interconnect class)."""
    return next(d for d in MFU_DEFAULTS if d.nvlink == gpu.nvlink and gpus <= d.max_gpus)
