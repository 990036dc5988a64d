"""The estimator: FLOPs → GPU-seconds → wall clock → cost, and the feasibility check of a claim.

Pure and exact: FLOPs are integers, shares are Decimals, time is a Fraction until the one
rounding rule per output (docs/dev/estimator.md):
- wall-clock seconds = ceil(FLOPs ÷ (GPUs × peak × MFU × goodput)): a job cannot end early;
- the GPUs are held for the whole wall clock: GPU-seconds = GPUs × wall-clock seconds;
- cost = price per card-hour × GPU-seconds ÷ 3,600, half up to the micro-unit (`cost_of`);
- the monthly plan is bought by the 30-day month: months = ceil(wall clock ÷ 720 h).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from cardhour.core.catalog import HOURS_PER_MONTH, Catalog
from cardhour.core.errors import InvalidInput, NotFound
from cardhour.core.gpus import GpuModel
from cardhour.core.money import Money
from cardhour.estimator.cost import SECONDS_PER_DAY, SECONDS_PER_HOUR, cost_of
from cardhour.estimator.hardware import (
    CEILING_BASIS,
    DEFAULT_GOODPUT,
    GOODPUT_BASIS,
    MFU_CEILING,
    default_mfu,
)
from cardhour.estimator.models import DENSE_FACTOR, Mode, ModelSpec
from cardhour.estimator.providers import DEFAULT_USD_CNY, ProviderCost, compare

MAX_GPUS = 1_000_000
MAX_DAYS = Decimal(36_500)
MAX_GPU_HOURS = Decimal(10**12)
TERA = 10**12


@dataclass(frozen=True)
class Pricing:
    """Our price per card-hour for the job: from the price book, or given by the user."""

    on_demand: Money
    monthly: Money
    monthly_discount_percent: int
    source: str


def book_pricing(catalog: Catalog, gpu: GpuModel) -> Pricing | None:
    """The cheapest on-demand price of `gpu` over the data centres that have it; None if none."""
    model = None
    for query in (gpu.id, gpu.name, *gpu.aliases):
        try:
            model = catalog.model(query)
            break
        except InvalidInput:
            continue
    if model is None:
        return None
    best: tuple[Money, str] | None = None
    for dc in sorted({n.data_centre for n in catalog.nodes if n.gpu_model == model.id}):
        try:
            price = catalog.prices.on_demand(model.id, dc)
        except NotFound:
            continue
        if best is None or price.micros < best[0].micros:
            best = (price, dc)
    if best is None:
        return None
    price, dc = best
    percent = catalog.prices.monthly_discount_percent
    return Pricing(
        price,
        catalog.prices.monthly(model.id, dc),
        percent,
        f"price book, {model.id} in {catalog.data_centre(dc).name}",
    )


def given_pricing(price: Money, monthly_discount_percent: int) -> Pricing:
    """A price the user typed; the monthly plan applies the price book's discount to it."""
    if price.micros <= 0:
        raise InvalidInput("--price must be positive")
    if price.micros > MAX_PRICE_MICROS:
        raise InvalidInput("--price must be at most 1,000,000 per card-hour")
    return Pricing(
        price, price.percent_off(monthly_discount_percent), monthly_discount_percent, "given"
    )


MAX_PRICE_MICROS = 1_000_000 * 1_000_000  # 1,000,000 per card-hour


@dataclass(frozen=True)
class Job:
    model: ModelSpec
    tokens: int
    gpu: GpuModel
    gpus: int
    mode: Mode = Mode.PRETRAIN
    mfu: Decimal | None = None  # None: the default for the GPU and scale
    goodput: Decimal | None = None  # None: DEFAULT_GOODPUT

    def __post_init__(self) -> None:
        if not 1 <= self.gpus <= MAX_GPUS:
            raise InvalidInput(f"GPU count must be between 1 and {MAX_GPUS:,}, got {self.gpus}")
        if self.tokens <= 0:
            raise InvalidInput("tokens must be positive")
        for name, share in (("MFU", self.mfu), ("goodput", self.goodput)):
            if share is not None and not 0 < share <= 1:
                raise InvalidInput(f"{name} must be in (0, 1], got {share}")


@dataclass(frozen=True)
class Estimate:
    job: Job
    dense_per_token: int  # k·N
    attention_per_token: int  # 12·L·H·Q·T
    mfu: Decimal
    mfu_basis: str
    goodput: Decimal
    goodput_basis: str
    wall_seconds: int
    pricing: Pricing | None
    usd_cny: Decimal
    comparison: list[ProviderCost] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def flops_per_token(self) -> int:
        return self.dense_per_token + self.attention_per_token

    @property
    def flops_dense(self) -> int:
        return self.dense_per_token * self.job.tokens

    @property
    def flops_attention(self) -> int:
        return self.attention_per_token * self.job.tokens

    @property
    def flops(self) -> int:
        return self.flops_per_token * self.job.tokens

    @property
    def peak_flops(self) -> Decimal:
        """Dense BF16 FLOP/s of one GPU."""
        return self.job.gpu.bf16_tflops * TERA

    @property
    def achieved_flops(self) -> Decimal:
        """FLOP/s per GPU while training: peak × MFU."""
        return self.peak_flops * self.mfu

    @property
    def tokens_per_second_per_gpu(self) -> Fraction:
        """While training (before goodput): peak × MFU ÷ FLOPs per token."""
        return Fraction(self.achieved_flops) / self.flops_per_token

    @property
    def compute_gpu_seconds(self) -> Fraction:
        """FLOPs ÷ (peak × MFU × goodput), before the wall clock is rounded up."""
        return Fraction(self.flops) / (Fraction(self.achieved_flops) * Fraction(self.goodput))

    @property
    def gpu_seconds(self) -> int:
        return self.wall_seconds * self.job.gpus

    @property
    def gpu_hours(self) -> Fraction:
        return Fraction(self.gpu_seconds, SECONDS_PER_HOUR)

    @property
    def days(self) -> Fraction:
        return Fraction(self.wall_seconds, SECONDS_PER_DAY)

    @property
    def feasible(self) -> bool:
        return self.mfu <= MFU_CEILING

    @property
    def cost_on_demand(self) -> Money | None:
        return cost_of(self.pricing.on_demand, self.gpu_seconds) if self.pricing else None

    @property
    def months(self) -> int:
        """30-day months the monthly plan must cover: ceil(wall clock ÷ 720 h)."""
        return -(-self.wall_seconds // (HOURS_PER_MONTH * SECONDS_PER_HOUR))

    @property
    def cost_monthly(self) -> Money | None:
        """Whole months × 720 h × GPUs × the monthly plan's price per card-hour."""
        if not self.pricing:
            return None
        return cost_of(
            self.pricing.monthly, self.months * HOURS_PER_MONTH * SECONDS_PER_HOUR * self.job.gpus
        )

    @property
    def cost_monthly_pro_rata(self) -> Money | None:
        return cost_of(self.pricing.monthly, self.gpu_seconds) if self.pricing else None


def estimate(job: Job, pricing: Pricing | None, usd_cny: Decimal = DEFAULT_USD_CNY) -> Estimate:
    """How long and how much `job` takes. Never raises for a valid `Job`."""
    if not usd_cny > 0:
        raise InvalidInput(f"the exchange rate must be positive, got {usd_cny}")
    default = default_mfu(job.gpu, job.gpus)
    mfu = job.mfu if job.mfu is not None else default.mfu
    mfu_basis = "given" if job.mfu is not None else default.basis
    goodput = job.goodput if job.goodput is not None else DEFAULT_GOODPUT
    goodput_basis = "given" if job.goodput is not None else GOODPUT_BASIS
    dense = DENSE_FACTOR[job.mode] * job.model.params
    attention = job.model.attention_flops_per_token()
    flops = (dense + attention) * job.tokens
    per_gpu = Fraction(job.gpu.bf16_tflops * TERA) * Fraction(mfu) * Fraction(goodput)
    wall = Fraction(flops) / (per_gpu * job.gpus)
    wall_seconds = max(1, -(-wall.numerator // wall.denominator))
    warnings = []
    if mfu > MFU_CEILING:
        warnings.append(
            f"MFU {mfu} is above the {MFU_CEILING} ceiling ({CEILING_BASIS}): "
            "no such run has been published; treat this estimate as not achievable"
        )
    if not job.model.has_attention_term:
        warnings.append(
            "attention term left out: give layers, hidden size and sequence length to add it"
        )
    if pricing is None:
        warnings.append(f"no price for {job.gpu.id} in the price book: give a price to cost it")
    ours = cost_of(pricing.on_demand, wall_seconds * job.gpus) if pricing else None
    comparison = compare(job.gpu.id, wall_seconds * job.gpus, ours, usd_cny)
    return Estimate(
        job,
        dense,
        attention,
        mfu,
        mfu_basis,
        goodput,
        goodput_basis,
        wall_seconds,
        pricing,
        usd_cny,
        comparison,
        warnings,
    )


@dataclass(frozen=True)
class Claim:
    """A published or quoted figure: `days` on the job's GPUs, or total `gpu_hours`."""

    days: Decimal | None = None
    gpu_hours: Decimal | None = None

    def __post_init__(self) -> None:
        if (self.days is None) == (self.gpu_hours is None):
            raise InvalidInput("a check needs exactly one of --days or --gpu-hours")
        if self.days is not None and not 0 < self.days <= MAX_DAYS:
            raise InvalidInput(f"days must be in (0, {MAX_DAYS}], got {self.days}")
        if self.gpu_hours is not None and not 0 < self.gpu_hours <= MAX_GPU_HOURS:
            raise InvalidInput(f"GPU-hours must be in (0, {MAX_GPU_HOURS:,}], got {self.gpu_hours}")

    def gpu_seconds(self, gpus: int) -> Fraction:
        if self.days is not None:
            return Fraction(self.days) * SECONDS_PER_DAY * gpus
        assert self.gpu_hours is not None
        return Fraction(self.gpu_hours) * SECONDS_PER_HOUR


@dataclass(frozen=True)
class Check:
    estimate: Estimate  # the same job at the MFU and goodput in use
    claim: Claim
    gpu_seconds: Fraction  # what the claim gives
    implied_mfu: Fraction  # FLOPs ÷ (claimed GPU-seconds × peak): end to end
    implied_mfu_dense: Fraction  # the same with the dense term (k·N·D) only
    ceiling: Decimal
    min_gpu_seconds: Fraction  # FLOPs ÷ (peak × ceiling)

    @property
    def feasible(self) -> bool:
        return self.implied_mfu <= Fraction(self.ceiling)

    @property
    def shortfall_x(self) -> Fraction | None:
        """How many times too little GPU time the claim gives; None when it is feasible."""
        return None if self.feasible else self.implied_mfu / Fraction(self.ceiling)

    @property
    def gpu_hours(self) -> Fraction:
        return self.gpu_seconds / SECONDS_PER_HOUR

    @property
    def days(self) -> Fraction:
        return self.gpu_seconds / self.estimate.job.gpus / SECONDS_PER_DAY

    @property
    def cost_on_demand(self) -> Money | None:
        pricing = self.estimate.pricing
        return cost_of(pricing.on_demand, self.gpu_seconds) if pricing else None


def check(
    job: Job, claim: Claim, pricing: Pricing | None, usd_cny: Decimal = DEFAULT_USD_CNY
) -> Check:
    """The MFU a claim implies for `job`, and whether the hardware can deliver it."""
    expected = estimate(job, pricing, usd_cny)
    seconds = claim.gpu_seconds(job.gpus)
    peak = Fraction(expected.peak_flops)
    return Check(
        expected,
        claim,
        seconds,
        Fraction(expected.flops) / (seconds * peak),
        Fraction(expected.flops_dense) / (seconds * peak),
        MFU_CEILING,
        Fraction(expected.flops) / (peak * Fraction(MFU_CEILING)),
    )
