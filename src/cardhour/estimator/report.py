"""The estimate as JSON (`cardhour estimate --json`, `GET /api/v1/estimate`): one shape for both.

Rounding of the JSON numbers: `gpu_hours` and `days` half up to 0.01,
`tokens_per_second_per_gpu` half up to 0.1; `seconds` is exact (whole seconds of wall clock);
`flops*` are floats of exact integers; MFUs are floats of exact fractions. Money is a decimal
string of the exact amount (micro-unit, at least two decimals: "8755.20", "1.235").
"""

from __future__ import annotations

from fractions import Fraction

from pydantic import BaseModel, Field

from cardhour.core.money import Money
from cardhour.estimator.cost import decimal_places
from cardhour.estimator.estimate import Check, Estimate
from cardhour.estimator.explain import check_lines, estimate_lines, verdict
from cardhour.estimator.hardware import MFU_CEILING, PEAK_SOURCE
from cardhour.estimator.providers import COMPARISON_CURRENCY, USD_CNY_AS_OF


class ModelRead(BaseModel):
    id: str
    name: str
    params: int
    layers: int | None
    hidden: int | None
    heads: int | None
    seq_len: int | None
    source: str


class GpuRead(BaseModel):
    id: str
    name: str
    bf16_tflops: str = Field(description="Dense BF16 peak per GPU, TFLOP/s.")
    source: str = PEAK_SOURCE


class ProviderCostRead(BaseModel):
    provider: str
    price: str = Field(description="Per GPU-hour in the provider's currency.")
    price_currency: str
    price_cny: str = Field(description="Per GPU-hour in CNY at usd_cny, half up to 0.000001.")
    cost: str = Field(description="The same GPU-hours × price_cny, CNY.")
    savings: str | None = Field(description="Their cost − ours, CNY (positive: we are cheaper).")
    savings_percent: str | None = Field(description="savings ÷ their cost, half up to 0.1.")
    granularity: str
    source: str
    as_of: str
    note: str


class EstimateRead(BaseModel):
    model: ModelRead
    mode: str
    tokens: int
    gpu: GpuRead
    gpus: int
    flops: float = Field(description="Total training FLOPs: dense + attention.")
    flops_dense: float = Field(description="k·N·D (k = 6; 4 for LoRA).")
    flops_attention: float = Field(description="12·L·H·Q·T·D.")
    flops_per_token: int
    mfu: float
    mfu_basis: str
    goodput: float
    goodput_basis: str
    mfu_ceiling: float
    tokens_per_second_per_gpu: float = Field(description="While training (before goodput).")
    seconds: int = Field(description="Wall clock, whole seconds (rounded up).")
    days: float
    gpu_hours: float = Field(description="GPUs × wall clock, half up to 0.01.")
    currency: str | None
    price_source: str | None
    price_on_demand: str | None
    price_monthly: str | None
    cost_on_demand: str | None = Field(description="Decimal string; GPUs × seconds × price.")
    monthly_plan_months: int
    cost_monthly: str | None = Field(description="Whole 30-day months at the monthly price.")
    cost_monthly_pro_rata: str | None
    usd_cny: str = Field(description="Exchange rate used for USD rows (not live).")
    usd_cny_as_of: str = USD_CNY_AS_OF
    comparison_currency: str = COMPARISON_CURRENCY
    comparison: list[ProviderCostRead]
    feasible: bool = Field(
        description="Estimate: MFU within the ceiling. Check: the claim's implied MFU is."
    )
    formula: list[str]
    warnings: list[str]
    # --check only
    claim_days: float | None = None
    claim_gpu_hours: float | None = None
    claim_cost_on_demand: str | None = None
    implied_mfu: float | None = Field(default=None, description="FLOPs ÷ (GPU-seconds × peak).")
    implied_mfu_dense: float | None = None
    shortfall_x: float | None = Field(
        default=None, description="implied MFU ÷ ceiling when not feasible, else null."
    )
    min_gpu_hours: float | None = Field(default=None, description="GPU-hours at the ceiling.")
    verdict: str | None = None


def _money(value: Money | None) -> str | None:
    return value.display() if value is not None else None


def _round(value: Fraction, places: int) -> float:
    return float(decimal_places(value, places))


def estimate_read(e: Estimate) -> EstimateRead:
    m, job, p = e.job.model, e.job, e.pricing
    return EstimateRead(
        model=ModelRead(
            id=m.id,
            name=m.name,
            params=m.params,
            layers=m.layers,
            hidden=m.hidden,
            heads=m.heads,
            seq_len=m.seq_len,
            source=m.source,
        ),
        mode=job.mode.value,
        tokens=job.tokens,
        gpu=GpuRead(id=job.gpu.id, name=job.gpu.name, bf16_tflops=str(job.gpu.bf16_tflops)),
        gpus=job.gpus,
        flops=float(e.flops),
        flops_dense=float(e.flops_dense),
        flops_attention=float(e.flops_attention),
        flops_per_token=e.flops_per_token,
        mfu=float(e.mfu),
        mfu_basis=e.mfu_basis,
        goodput=float(e.goodput),
        goodput_basis=e.goodput_basis,
        mfu_ceiling=float(MFU_CEILING),
        tokens_per_second_per_gpu=_round(e.tokens_per_second_per_gpu, 1),
        seconds=e.wall_seconds,
        days=_round(e.days, 2),
        gpu_hours=_round(e.gpu_hours, 2),
        currency=p.on_demand.currency if p else None,
        price_source=p.source if p else None,
        price_on_demand=_money(p.on_demand) if p else None,
        price_monthly=_money(p.monthly) if p else None,
        cost_on_demand=_money(e.cost_on_demand),
        monthly_plan_months=e.months,
        cost_monthly=_money(e.cost_monthly),
        cost_monthly_pro_rata=_money(e.cost_monthly_pro_rata),
        usd_cny=str(e.usd_cny),
        comparison=[
            ProviderCostRead(
                provider=c.row.provider,
                price=str(c.row.price),
                price_currency=c.row.currency,
                price_cny=c.price.display(),
                cost=c.cost.display(),
                savings=_money(c.savings),
                savings_percent=str(c.savings_percent) if c.savings_percent is not None else None,
                granularity=c.row.granularity,
                source=c.row.source,
                as_of=c.row.as_of,
                note=c.row.note,
            )
            for c in e.comparison
        ],
        feasible=e.feasible,
        formula=estimate_lines(e),
        warnings=list(e.warnings),
    )


def check_read(c: Check) -> EstimateRead:
    base = estimate_read(c.estimate)
    shortfall = c.shortfall_x
    return base.model_copy(
        update={
            "feasible": c.feasible,
            "formula": check_lines(c),
            "claim_days": _round(c.days, 2),
            "claim_gpu_hours": _round(c.gpu_hours, 2),
            "claim_cost_on_demand": _money(c.cost_on_demand),
            "implied_mfu": float(c.implied_mfu),
            "implied_mfu_dense": float(c.implied_mfu_dense),
            "shortfall_x": float(shortfall) if shortfall is not None else None,
            "min_gpu_hours": _round(c.min_gpu_seconds / 3600, 2),
            "verdict": verdict(c),
        }
    )
