"""Parsing the numbers people type: `15T` tokens, `405B` parameters, `6.4M` GPU-hours, `0.404`.

Contract: every parser returns an exact value (`int` or `Decimal`, never a float) or raises
`InvalidInput` with one line that names the input and says what was expected. Suffixes are
decimal and case-insensitive: k = 10^3, M = 10^6, B (or G) = 10^9, T = 10^12, P = 10^15;
`_` and `,` group digits (`1,300,000`); scientific notation works (`2e12`, `3.8e25`).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation, localcontext

from cardhour.core.errors import InvalidInput

SUFFIXES = {"k": 3, "m": 6, "b": 9, "g": 9, "t": 12, "p": 15}
MIN_SHARE = Decimal("0.001")  # an MFU or goodput below 0.1% is a typo, and its costs overflow
MAX_TEXT = 40
_NUMBER = re.compile(r"([0-9.eE+\-]+)\s*([kKmMbBgGtTpP]?)")


def parse_quantity(
    text: str | int | Decimal, what: str, *, maximum: Decimal, example: str = "15T, 500B or 2e12"
) -> Decimal:
    """A positive number with an optional suffix, at most `maximum`; exact."""
    raw = str(text).strip().replace("_", "").replace(",", "")
    match = _NUMBER.fullmatch(raw) if raw and len(raw) <= MAX_TEXT else None
    if not match:
        raise InvalidInput(f"{what}: expected a number such as {example}, got {text!r}")
    try:
        with localcontext(prec=MAX_TEXT + 45):  # every digit typed survives the suffix scaling
            value = Decimal(match.group(1))
            if value.is_finite() and value > 0 and abs(value.adjusted()) <= 40:
                value = value.scaleb(SUFFIXES.get(match.group(2).lower(), 0))
    except InvalidOperation:
        raise InvalidInput(f"{what}: {text!r} is not a number") from None
    if not value.is_finite() or value <= 0:
        raise InvalidInput(f"{what} must be a positive number, got {text!r}")
    if abs(value.adjusted()) > 40 + 15:  # keeps comparisons cheap and exact
        raise InvalidInput(f"{what} {text!r} is out of range")
    if value > maximum:
        raise InvalidInput(f"{what} {text!r} is out of range (at most {maximum:,})")
    return value


def parse_count(
    text: str | int | Decimal, what: str, *, maximum: int, example: str = "15T, 500B or 2e12"
) -> int:
    """A positive whole number with an optional suffix (`15.6T` = 15,600,000,000,000)."""
    value = parse_quantity(text, what, maximum=Decimal(maximum), example=example)
    if value != value.to_integral_value():
        raise InvalidInput(f"{what} must be a whole number, got {text!r}")
    return int(value)


def parse_share(text: str | Decimal | None, what: str) -> Decimal | None:
    """A share in (0, 1] such as MFU 0.404 or goodput 0.9; `None` or empty stays `None`."""
    if text is None or str(text).strip() == "":
        return None
    raw = str(text).strip()
    try:
        value = Decimal(raw) if len(raw) <= MAX_TEXT else Decimal("NaN")
    except InvalidOperation:
        raise InvalidInput(f"{what}: {text!r} is not a number") from None
    if not value.is_finite() or not MIN_SHARE <= value <= 1:
        raise InvalidInput(
            f"{what} must be a number in [{MIN_SHARE}, 1], such as 0.4, got {text!r}"
        )
    return value
