"""Parsing token counts, parameter counts, GPU-hours and shares: tables and properties."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardhour.core.errors import InvalidInput
from cardhour.estimator.parse import parse_count, parse_quantity, parse_share

BIG = 10**18


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("15T", 15 * 10**12),
        ("15.6T", 15_600_000_000_000),
        ("500B", 500 * 10**9),
        ("2e12", 2 * 10**12),
        ("1.3M", 1_300_000),
        ("100k", 100_000),
        ("8b", 8 * 10**9),
        ("1,300,000", 1_300_000),
        ("1_000", 1000),
        (" 7 B ", 7 * 10**9),
        ("1P", 10**15),
        ("3.8e25", None),  # over the maximum below
    ],
)
def test_counts(text: str, value: int | None) -> None:
    if value is None:
        with pytest.raises(InvalidInput, match="out of range"):
            parse_count(text, "tokens", maximum=BIG)
    else:
        assert parse_count(text, "tokens", maximum=BIG) == value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected a number"),
        ("lots", "expected a number"),
        ("15X", "expected a number"),
        ("0", "positive"),
        ("-5T", "positive"),
        ("1.5", "whole number"),
        ("1.23456789k", "whole number"),
        ("1e", "not a number"),
        ("nan", "expected a number"),
        ("1e999999999", "out of range"),
        ("9" * 50, "expected a number"),
    ],
)
def test_bad_counts(text: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as err:
        parse_count(text, "tokens", maximum=BIG)
    assert err.value.message.startswith("tokens")
    assert "\n" not in err.value.message


def test_quantities_keep_fractions_exact() -> None:
    assert parse_quantity("6.4M", "GPU-hours", maximum=Decimal(10**12)) == Decimal(6_400_000)
    assert parse_quantity("0.5", "days", maximum=Decimal(100)) == Decimal("0.5")
    assert parse_quantity("24", "days", maximum=Decimal(100)) == 24


@pytest.mark.parametrize(("text", "value"), [("0.404", "0.404"), ("1", "1"), (" 0.9 ", "0.9")])
def test_shares(text: str, value: str) -> None:
    assert parse_share(text, "MFU") == Decimal(value)


@pytest.mark.parametrize("text", ["0", "1.01", "-0.1", "abc", "inf", "nan", "40%"])
def test_bad_shares(text: str) -> None:
    with pytest.raises(InvalidInput, match="MFU"):
        parse_share(text, "MFU")


def test_empty_share_is_default() -> None:
    assert parse_share(None, "MFU") is None and parse_share("  ", "MFU") is None


@given(st.integers(min_value=1, max_value=BIG))
def test_plain_integers_round_trip(n: int) -> None:
    assert parse_count(str(n), "tokens", maximum=BIG) == n
    assert parse_count(f"{n:,}", "tokens", maximum=BIG) == n


@given(st.integers(min_value=1, max_value=999_999), st.sampled_from(["k", "M", "B", "T"]))
def test_suffixes_are_powers_of_ten(n: int, suffix: str) -> None:
    power = {"k": 3, "M": 6, "B": 9, "T": 12}[suffix]
    assert parse_count(f"{n}{suffix}", "x", maximum=BIG) == n * 10**power
    assert parse_count(f"{n}e{power}", "x", maximum=BIG) == n * 10**power
