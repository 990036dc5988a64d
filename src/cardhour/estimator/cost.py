"""Exact cost arithmetic: GPU-seconds as a Fraction, prices as Money, one rounding at the end.

`cost_of(price, gpu_seconds)` = price per card-hour × GPU-seconds ÷ 3,600, rounded half up to the
micro-unit (billing's unit, docs/dev/billing.md). For whole seconds it equals
`rate_usage(price, gpu_seconds × 1000)`, what the platform would bill for that usage.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from cardhour.core.money import MICROS_PER_UNIT, Money

SECONDS_PER_HOUR = 3600
SECONDS_PER_DAY = 86_400


def round_half_up(value: Fraction) -> int:
    """The nearest integer, halves away from zero."""
    sign = -1 if value < 0 else 1
    whole, rest = divmod(abs(value), 1)
    return sign * (int(whole) + (1 if rest >= Fraction(1, 2) else 0))


def cost_of(price: Money, gpu_seconds: Fraction | int) -> Money:
    """`price` (per card-hour) for `gpu_seconds`, half up to the micro-unit."""
    return Money(
        round_half_up(price.micros * Fraction(gpu_seconds) / SECONDS_PER_HOUR), price.currency
    )


def convert(amount: Decimal, rate: Decimal, currency: str) -> Money:
    """`amount` × `rate` in `currency`, half up to the micro-unit (exact before that)."""
    return Money(round_half_up(Fraction(amount) * Fraction(rate) * MICROS_PER_UNIT), currency)


def decimal_places(value: Fraction, places: int) -> Decimal:
    """`value` rounded half up to `places` decimals, as an exact Decimal."""
    scaled = round_half_up(value * 10**places)
    return Decimal(scaled).scaleb(-places)
