from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardhour.core.money import Money, MoneyError, rate_usage


@pytest.mark.parametrize(
    ("text", "micros"),
    [("1.90", 1_900_000), ("0", 0), ("10", 10_000_000), ("0.000001", 1), ("-2.5", -2_500_000)],
)
def test_parse(text: str, micros: int) -> None:
    assert Money.parse(text).micros == micros


@pytest.mark.parametrize("text", ["abc", "1.0000001", "NaN", "inf", ""])
def test_parse_refuses(text: str) -> None:
    with pytest.raises(MoneyError):
        Money.parse(text)


def test_float_is_not_money() -> None:
    with pytest.raises(MoneyError):
        Money(1.5)  # type: ignore[arg-type]


def test_formats() -> None:
    assert Money.parse("1.90").display() == "1.90"
    assert Money.parse("1.235").display() == "1.235"
    assert Money.parse("9.999999").floor_str() == "9.99"
    assert Money.parse("9.995").format() == "10.00"
    assert Money.parse("-0.001").floor_str() == "-0.01"
    assert Money.parse("1.90").percent_off(35) == Money.parse("1.235")


def test_currency_mismatch() -> None:
    with pytest.raises(MoneyError):
        _ = Money(1, "CNY") + Money(1, "USD")


def test_rate_one_hour_is_the_price() -> None:
    assert rate_usage(Money.parse("1.90"), 3600 * 1000) == Money.parse("1.90")
    assert rate_usage(Money.parse("1.90"), 8 * 3600 * 1000) == Money.parse("15.20")


def test_rate_rounds_half_up_to_the_micro_unit() -> None:
    # 1000 s of 1.90/h = 0.5277777… CNY → 527,778 µCNY
    assert rate_usage(Money.parse("1.90"), 1000 * 1000).micros == 527_778
    # 0.60/h for 1 s = 166.666… µCNY → 167
    assert rate_usage(Money.parse("0.60"), 1000).micros == 167


@given(
    price=st.integers(min_value=1, max_value=100_000_000),
    chunks=st.lists(st.integers(min_value=0, max_value=10**7), min_size=1, max_size=50),
)
def test_cumulative_rating_never_drifts(price: int, chunks: list[int]) -> None:
    """Charging deltas of cumulative ratings sums to the rating of the total, which is within
    half a micro-unit of the exact amount, however the usage was split."""
    p = Money(price)
    charged = 0
    used = 0
    for chunk in chunks:
        used += chunk
        charged += rate_usage(p, used).micros - charged
    exact = Decimal(price) * used / (3600 * 1000)
    assert charged == rate_usage(p, used).micros
    assert abs(Decimal(charged) - exact) <= Decimal("0.5")
