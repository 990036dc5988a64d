"""Training time and cost estimate, and the check of a claim. Public, pure: no transaction.

Same inputs and JSON as `cardhour estimate --json`; priced with this server's price book.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query

from cardhour.api.deps import get_platform
from cardhour.estimator import EstimateQuery, EstimateRead, run
from cardhour.platform import Platform

router = APIRouter(tags=["estimate"])


@router.get("/estimate", response_model=EstimateRead)
def estimate(
    tokens: str = Query(description="Training tokens: 15T, 15.6T, 500B, 2e12."),
    model: str | None = Query(default=None, description="Preset: llama3-8b, llama3.1-405b, …"),
    params: str | None = Query(default=None, description="Custom model parameters: 7B."),
    layers: str | None = Query(default=None, description="Layers (L)."),
    hidden: str | None = Query(default=None, description="Hidden size (H·Q)."),
    seq_len: str | None = Query(default=None, description="Sequence length (T)."),
    mode: str = Query(default="pretrain", description="pretrain, full or lora."),
    gpu: str = Query(default="H100", description="GPU model."),
    gpus: str = Query(default="8", description="Number of GPUs."),
    mfu: str | None = Query(default=None, description="MFU in (0, 1]; default by GPU, scale."),
    goodput: str | None = Query(default=None, description="Goodput in (0, 1]; default 0.9."),
    price: str | None = Query(default=None, description="Per card-hour; default price book."),
    usd_cny: str | None = Query(default=None, description="CNY per USD for the comparison."),
    check: bool = Query(default=False, description="Check a claim (needs days or gpu_hours)."),
    days: str | None = Query(default=None, description="Claim: days on `gpus` GPUs."),
    gpu_hours: str | None = Query(default=None, description="Claim: total GPU-hours (6.4M)."),
    platform: Platform = Depends(get_platform),
) -> EstimateRead:
    query = EstimateQuery(
        tokens=tokens, gpu=gpu, gpus=gpus, model=model, params=params, layers=layers,
        hidden=hidden, seq_len=seq_len, mode=mode, mfu=mfu, goodput=goodput, price=price,
        usd_cny=usd_cny, check=check, days=days, gpu_hours=gpu_hours,
    )  # fmt: skip
    return run(query, platform.catalog)
