"""Other providers' per-GPU-hour prices (a small, dated table from FACTS.md) and the comparison.

The table is a snapshot, not a feed: every row names its source and the month it was read.
USD rows are converted at an explicit exchange rate (`DEFAULT_USD_CNY`, dated, overridable); the
converted price per card-hour is rounded half up to the micro-unit, then
cost = hours × cards × price exactly (one more half-up rounding to the micro-unit at the end).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from cardhour.core.money import Money
from cardhour.estimator.cost import convert, cost_of, decimal_places

#: CNY per USD. A round figure set with the price table, not a live quote: pass `--usd-cny`.
DEFAULT_USD_CNY = Decimal("7.10")
USD_CNY_AS_OF = "2026-09"
COMPARISON_CURRENCY = "CNY"


@dataclass(frozen=True)
class ProviderPrice:
    provider: str
    gpu: str  # an id of `hardware.GPUS`
    price: Decimal  # per GPU-hour, on demand
    currency: str  # "USD" or "CNY"
    granularity: str
    source: str
    as_of: str  # YYYY-MM the price was read
    note: str = ""


def _rows(provider: str, granularity: str, source: str, as_of: str, currency: str,
          prices: dict[str, str], note: str = "") -> list[ProviderPrice]:  # fmt: skip
    return [
        ProviderPrice(provider, gpu, Decimal(p), currency, granularity, source, as_of, note)
        for gpu, p in prices.items()
    ]


PRICES: tuple[ProviderPrice, ...] = (
    *_rows("RunPod community", "per second", "runpod.io price table", "2026-09", "USD",
           {"H100": "2.69", "H200": "3.59", "A100": "1.39", "L40S": "0.79", "RTX4090": "0.34"}),
    *_rows("RunPod secure", "per second", "runpod.io price table", "2026-09", "USD",
           {"H100": "3.49", "H200": "4.59", "A100": "1.59", "L40S": "1.09", "RTX4090": "0.74"}),
    *_rows("Lambda 8× instance", "per minute, after health check", "lambda.ai instances",
           "2026-09", "USD", {"H100": "3.99", "A100": "2.79"}),
    *_rows("Lambda 1× instance", "per minute, after health check", "lambda.ai instances",
           "2026-09", "USD", {"H100": "4.29"}),
    *_rows("Vast.ai marketplace, low end", "per second", "vast.ai offers (median range)",
           "2026-10", "USD", {"H100": "2.40"}, "marketplace range ~2.4-3.5"),
    *_rows("Vast.ai marketplace, high end", "per second", "vast.ai offers (median range)",
           "2026-10", "USD", {"H100": "3.50"}, "marketplace range ~2.4-3.5"),
    *_rows("Vast.ai marketplace", "per second", "vast.ai offers (median)", "2026-10", "USD",
           {"H200": "5.60"}, "approximate median"),
    *_rows("CoreWeave (HGX 8-GPU ÷ 8)", "—", "coreweave.com pricing", "2026-09", "USD",
           {"H100": "6.16", "H200": "6.31", "A100": "2.70", "L40S": "2.25"}),
    *_rows("AWS p5.48xlarge ÷ 8, us-east-1", "per second", "AWS EC2 on-demand pricing",
           "2026-09", "USD", {"H100": "6.88"}),
    *_rows("AWS p5en.48xlarge ÷ 8, us-east-1", "per second", "AWS EC2 on-demand pricing",
           "2026-09", "USD", {"H200": "7.91"}),
    *_rows("AWS p4d.24xlarge ÷ 8, us-east-1", "per second", "AWS EC2 on-demand pricing",
           "2026-09", "USD", {"A100": "2.74"}, "A100 40 GB, not 80 GB"),
    *_rows("AutoDL", "per second, deducted hourly", "AutoDL market", "2026-08", "CNY",
           {"H800": "8.88", "A800": "4.98"}, "approximate"),
    *_rows("AutoDL, low end", "per second, deducted hourly", "AutoDL market", "2026-08", "CNY",
           {"RTX4090": "1.88"}, "range 1.88-2.08"),
    *_rows("AutoDL, high end", "per second, deducted hourly", "AutoDL market", "2026-08", "CNY",
           {"RTX4090": "2.08"}, "range 1.88-2.08"),
)  # fmt: skip


@dataclass(frozen=True)
class ProviderCost:
    """The same job at one provider; `savings` = their cost − ours (positive: we are cheaper)."""

    row: ProviderPrice
    price: Money  # per card-hour, in CNY
    cost: Money
    savings: Money | None
    savings_percent: Decimal | None  # of their cost, half up to 0.1


def price_in_cny(row: ProviderPrice, usd_cny: Decimal) -> Money:
    rate = Decimal(1) if row.currency == COMPARISON_CURRENCY else usd_cny
    return convert(row.price, rate, COMPARISON_CURRENCY)


def compare(
    gpu: str, gpu_seconds: Fraction | int, ours: Money | None, usd_cny: Decimal = DEFAULT_USD_CNY
) -> list[ProviderCost]:
    """Every provider row for `gpu` for the same GPU-seconds, cheapest first.

    `ours` is our cost of the same job; savings are shown only when it is in CNY.
    """
    found = []
    for row in PRICES:
        if row.gpu != gpu:
            continue
        price = price_in_cny(row, usd_cny)
        cost = cost_of(price, gpu_seconds)
        savings = percent = None
        if ours is not None and ours.currency == COMPARISON_CURRENCY:
            savings = cost - ours
            if cost.micros:
                percent = decimal_places(Fraction(savings.micros * 100, cost.micros), 1)
        found.append(ProviderCost(row, price, cost, savings, percent))
    return sorted(found, key=lambda c: (c.cost.micros, c.row.provider))
