"""Money as integer minor units, and the per-second rating rule.

Contract:
- The ledger's minor unit is the **micro-unit** of the currency (1 CNY = 1,000,000 µCNY), fine
  enough that one second of the cheapest card (0.60 CNY/h → 166.67 µCNY/s) is represented.
- Prices are quoted per card-hour; usage is counted in milli-GPU-seconds (one whole GPU for one
  second = 1,000).
- `rate_usage` rounds **half up** to the micro-unit, and is applied to *cumulative* usage, so the
  amount charged for an instance never differs from the exact amount by more than half a micro-unit.
- Display strings are decimal; `format(places=2)` rounds half up; balances use `floor_str`.
No float touches an amount anywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_FLOOR, ROUND_HALF_UP, Decimal, InvalidOperation

MICROS_PER_UNIT = 1_000_000
_PLAIN = re.compile(r"[+-]?[0-9]{1,30}(\.[0-9]+)?")
MILLI_GPU_SECONDS_PER_CARD_HOUR = 1000 * 3600
DEFAULT_CURRENCY = "CNY"


class MoneyError(ValueError):
    """Raised for an amount that cannot be represented exactly."""


def _div_half_up(numerator: int, denominator: int) -> int:
    """Integer division rounding half away from zero (half up for non-negative values)."""
    if denominator <= 0:
        raise ValueError("denominator must be positive")
    sign = -1 if numerator < 0 else 1
    q, r = divmod(abs(numerator), denominator)
    if 2 * r >= denominator:
        q += 1
    return sign * q


@dataclass(frozen=True, order=True)
class Money:
    """An amount in micro-units of one currency."""

    micros: int
    currency: str = DEFAULT_CURRENCY

    def __post_init__(self) -> None:
        if not isinstance(self.micros, int) or isinstance(self.micros, bool):
            raise MoneyError("Money holds an int number of micro-units")

    @classmethod
    def parse(cls, text: str | int | Decimal, currency: str = DEFAULT_CURRENCY) -> Money:
        """Parse a plain decimal such as "1.90" or "-3" (no exponent, at most 30 digits before
        the point); refuses more than 6 decimal places."""
        raw = str(text).strip()
        if not _PLAIN.fullmatch(raw):
            raise MoneyError(f"not a decimal amount: {text!r}")
        try:
            value = Decimal(raw)
        except (InvalidOperation, ArithmeticError) as exc:
            raise MoneyError(f"not a decimal amount: {text!r}") from exc
        if not value.is_finite():
            raise MoneyError(f"not a finite amount: {text!r}")
        scaled = value * MICROS_PER_UNIT
        if scaled != scaled.to_integral_value():
            raise MoneyError(f"more than 6 decimal places: {text!r}")
        return cls(int(scaled), currency)

    @classmethod
    def zero(cls, currency: str = DEFAULT_CURRENCY) -> Money:
        return cls(0, currency)

    def _check(self, other: Money) -> None:
        if other.currency != self.currency:
            raise MoneyError(f"currency mismatch: {self.currency} vs {other.currency}")

    def __add__(self, other: Money) -> Money:
        self._check(other)
        return Money(self.micros + other.micros, self.currency)

    def __sub__(self, other: Money) -> Money:
        self._check(other)
        return Money(self.micros - other.micros, self.currency)

    def __neg__(self) -> Money:
        return Money(-self.micros, self.currency)

    def times(self, factor: int) -> Money:
        return Money(self.micros * factor, self.currency)

    def percent_off(self, percent: int) -> Money:
        """This amount less `percent`%, rounded half up to the micro-unit."""
        return Money(_div_half_up(self.micros * (100 - percent), 100), self.currency)

    def to_decimal(self) -> Decimal:
        return Decimal(self.micros) / MICROS_PER_UNIT

    def format(self, places: int = 2) -> str:
        """Decimal string rounded half up to `places` (e.g. "1.90")."""
        quantum = Decimal(1).scaleb(-places)
        return str(self.to_decimal().quantize(quantum, rounding=ROUND_HALF_UP))

    def floor_str(self, places: int = 2) -> str:
        """Decimal string rounded toward minus infinity: never shows more than is there."""
        quantum = Decimal(1).scaleb(-places)
        return str(self.to_decimal().quantize(quantum, rounding=ROUND_FLOOR))

    def display(self) -> str:
        """At least two decimals, more only when needed ("1.90", "1.235")."""
        text = self.format(6).rstrip("0")
        whole, _, frac = text.partition(".")
        return f"{whole}.{frac.ljust(2, '0')}"

    def exact_str(self) -> str:
        """All six decimals: the exact ledger amount."""
        return self.format(6)

    def __str__(self) -> str:
        return f"{self.format()} {self.currency}"


def rate_usage(price_per_card_hour: Money, milli_gpu_seconds: int) -> Money:
    """Cost of `milli_gpu_seconds` at `price_per_card_hour`, rounded half up to the micro-unit.

    Apply to cumulative usage and charge the difference from what was already charged.
    """
    return Money(
        rate_micros(price_per_card_hour.micros, milli_gpu_seconds), price_per_card_hour.currency
    )


def rate_micros(price_micros: int, milli_gpu_seconds: int) -> int:
    """`rate_usage` in micro-units of one currency, without building `Money` (hot loops)."""
    if milli_gpu_seconds < 0:
        raise MoneyError("usage cannot be negative")
    return _div_half_up(price_micros * milli_gpu_seconds, MILLI_GPU_SECONDS_PER_CARD_HOUR)


@dataclass(frozen=True)
class ExactCost:
    """An exact amount of usage cost: `micros + frac / 3,600,000` micro-units (0 ≤ frac < that).

    Rating several segments at their own prices and rounding only the total keeps an instance's
    charge within half a micro-unit of its exact cost, however many segments it has.
    """

    micros: int = 0
    frac: int = 0

    def plus_usage(self, price_per_card_hour: Money, milli_gpu_seconds: int) -> ExactCost:
        if milli_gpu_seconds < 0:
            raise MoneyError("usage cannot be negative")
        whole, frac = divmod(
            self.frac + price_per_card_hour.micros * milli_gpu_seconds,
            MILLI_GPU_SECONDS_PER_CARD_HOUR,
        )
        return ExactCost(self.micros + whole, frac)

    def rounded(self) -> int:
        """Half up to the micro-unit."""
        return self.micros + (1 if 2 * self.frac >= MILLI_GPU_SECONDS_PER_CARD_HOUR else 0)


#: The ledger unit of grant hours: milli-GPU-seconds (one card for one hour = 3,600,000 MGS),
#: the unit usage is metered in. Grant accounts hold card time, not money.
CARD_TIME_UNIT = "MGS"


def card_time_value(milli_gpu_seconds: int, price_micros: int) -> int:
    """What `milli_gpu_seconds` of card time pays at `price_micros` per card-hour, in
    micro-units, rounded down (card time never pays for more than it is worth)."""
    if milli_gpu_seconds <= 0 or price_micros <= 0:
        return 0
    return milli_gpu_seconds * price_micros // MILLI_GPU_SECONDS_PER_CARD_HOUR


def card_time_for(micros: int, price_micros: int) -> int:
    """The card time that pays `micros` at `price_micros` per card-hour, rounded up (never less
    card time than the usage it pays for). `card_time_for(card_time_value(t, p), p) <= t`."""
    if micros <= 0:
        return 0
    if price_micros <= 0:
        raise MoneyError("card time is worth nothing at a zero price")
    return -(-micros * MILLI_GPU_SECONDS_PER_CARD_HOUR // price_micros)
