"""One entry point for the CLI, the API and the console: raw text in, a checked report out.

Every field is the text a user typed (or None). Bad input raises `InvalidInput` with one line
naming the field; nothing is computed until everything parsed.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from cardhour.core.catalog import Catalog
from cardhour.core.errors import InvalidInput
from cardhour.core.money import Money, MoneyError
from cardhour.estimator.estimate import (
    MAX_DAYS,
    MAX_GPU_HOURS,
    MAX_GPUS,
    Claim,
    Job,
    Pricing,
    book_pricing,
    check,
    estimate,
    given_pricing,
)
from cardhour.estimator.hardware import resolve_gpu
from cardhour.estimator.models import (
    MAX_HIDDEN,
    MAX_LAYERS,
    MAX_PARAMS,
    MAX_SEQ_LEN,
    MAX_TOKENS,
    Mode,
    build_model,
)
from cardhour.estimator.parse import parse_count, parse_quantity, parse_share
from cardhour.estimator.providers import DEFAULT_USD_CNY
from cardhour.estimator.report import EstimateRead, check_read, estimate_read


@dataclass(frozen=True)
class EstimateQuery:
    tokens: str
    gpu: str = "H100"
    gpus: str = "8"
    model: str | None = None
    params: str | None = None
    layers: str | None = None
    hidden: str | None = None
    seq_len: str | None = None
    mode: str = "pretrain"
    mfu: str | None = None
    goodput: str | None = None
    price: str | None = None
    usd_cny: str | None = None
    check: bool = False
    days: str | None = None
    gpu_hours: str | None = None


def _opt_count(text: str | None, what: str, maximum: int) -> int | None:
    if text is None or text.strip() == "":
        return None
    return parse_count(text, what, maximum=maximum, example="32 or 4096")


def _opt_params(text: str | None) -> int | None:
    if text is None or text.strip() == "":
        return None
    return parse_count(text, "parameters", maximum=MAX_PARAMS, example="7B or 70.6e9")


def _opt_quantity(text: str | None, what: str, maximum: Decimal, example: str) -> Decimal | None:
    if text is None or text.strip() == "":
        return None
    return parse_quantity(text, what, maximum=maximum, example=example)


def parse_job(q: EstimateQuery, catalog: Catalog | None) -> Job:
    model = build_model(
        (q.model or "").strip() or None,
        _opt_params(q.params),
        _opt_count(q.layers, "layers", MAX_LAYERS),
        _opt_count(q.hidden, "hidden size", MAX_HIDDEN),
        _opt_count(q.seq_len, "sequence length", MAX_SEQ_LEN),
    )
    try:
        mode = Mode((q.mode or "pretrain").strip().lower())
    except ValueError:
        known = ", ".join(m.value for m in Mode)
        raise InvalidInput(f"mode must be one of {known}, got {q.mode!r}") from None
    return Job(
        model=model,
        tokens=parse_count(q.tokens, "tokens", maximum=MAX_TOKENS),
        gpu=resolve_gpu(q.gpu.strip(), catalog.gpu_models if catalog else None),
        gpus=parse_count(q.gpus, "GPU count", maximum=MAX_GPUS, example="8 or 1k"),
        mode=mode,
        mfu=parse_share(q.mfu, "MFU"),
        goodput=parse_share(q.goodput, "goodput"),
    )


def parse_pricing(q: EstimateQuery, job: Job, catalog: Catalog | None) -> Pricing | None:
    discount = catalog.prices.monthly_discount_percent if catalog else 35
    if q.price is not None and q.price.strip():
        currency = catalog.currency if catalog else "CNY"
        try:
            price = Money.parse(q.price, currency)
        except MoneyError as exc:
            raise InvalidInput(f"--price: {exc} (a decimal such as 1.90)") from None
        return given_pricing(price, discount)
    return book_pricing(catalog, job.gpu) if catalog else None


def parse_claim(q: EstimateQuery) -> Claim | None:
    days = _opt_quantity(q.days, "days", MAX_DAYS, "24 or 54.5")
    gpu_hours = _opt_quantity(q.gpu_hours, "GPU-hours", MAX_GPU_HOURS, "6.4M")
    if days is None and gpu_hours is None:
        if q.check:
            raise InvalidInput("a check needs --days or --gpu-hours (the claim to check)")
        return None
    return Claim(days, gpu_hours)


def run(q: EstimateQuery, catalog: Catalog | None) -> EstimateRead:
    """The estimate (or, with days or GPU-hours, the check of that claim) as its JSON shape."""
    job = parse_job(q, catalog)
    pricing = parse_pricing(q, job, catalog)
    rate = _opt_quantity(q.usd_cny, "USD→CNY rate", Decimal(1000), "7.10") or DEFAULT_USD_CNY
    claim = parse_claim(q)
    try:
        if claim is None:
            return estimate_read(estimate(job, pricing, rate))
        return check_read(check(job, claim, pricing, rate))
    except ArithmeticError:  # inputs valid one by one, a result too large to show
        raise InvalidInput(
            "the result is out of range: check the model size, tokens, MFU and price"
        ) from None
