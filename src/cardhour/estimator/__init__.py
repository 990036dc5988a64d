"""Training time and cost estimator, provider comparison and feasibility check. Pure: no I/O.

FLOPs = (k·N + 12·L·H·Q·T) × D; wall clock = FLOPs ÷ (GPUs × peak × MFU × goodput), rounded up
to the second; cost = GPUs × seconds × price ÷ 3,600, half up to the micro-unit. The rules, the
defaults and their sources are in docs/dev/estimator.md.
"""

from cardhour.estimator.estimate import (
    Check,
    Claim,
    Estimate,
    Job,
    Pricing,
    book_pricing,
    check,
    estimate,
    given_pricing,
)
from cardhour.estimator.hardware import GPUS, MFU_CEILING, resolve_gpu
from cardhour.estimator.models import PRESETS, Mode, ModelSpec, build_model, preset
from cardhour.estimator.query import EstimateQuery, run
from cardhour.estimator.report import EstimateRead

__all__ = [
    "GPUS",
    "MFU_CEILING",
    "PRESETS",
    "Check",
    "Claim",
    "Estimate",
    "EstimateQuery",
    "EstimateRead",
    "Job",
    "Mode",
    "ModelSpec",
    "Pricing",
    "book_pricing",
    "build_model",
    "check",
    "estimate",
    "given_pricing",
    "preset",
    "resolve_gpu",
    "run",
]
