"""Webhook signatures and event bodies: pure table tests, plus a property for sign → verify."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardhour.core.errors import BadSignature, InvalidInput
from cardhour.services import idempotency
from cardhour.services.billing import payments

SECRET = "whsec_test"
BODY = b'{"id":"evt_1","type":"payment.succeeded"}'
T = 1_700_000_000
NOW = datetime.fromtimestamp(T, UTC)


def test_sign_is_hmac_sha256_of_timestamp_dot_body() -> None:
    expected = hmac.new(SECRET.encode(), f"{T}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert payments.sign(SECRET, BODY, T) == f"t={T},v1={expected}"
    assert payments.verify(SECRET, payments.sign(SECRET, BODY, T), BODY, NOW) == T


def test_any_v1_entry_may_match_and_other_schemes_are_ignored() -> None:
    good = payments.signature(SECRET, T, BODY)
    old = payments.signature("whsec_old", T, BODY)
    for header in (
        f"t={T},v1={old},v1={good}",
        f"v1={good}, t={T}",
        f"t={T},v0=abc,v1={good.upper()}",
    ):
        assert payments.verify(SECRET, header, BODY, NOW) == T


@pytest.mark.parametrize(
    ("header", "body", "secret", "now_offset", "why"),
    [
        (None, BODY, SECRET, 0, "missing"),
        ("", BODY, SECRET, 0, "missing"),
        ("garbage", BODY, SECRET, 0, "malformed"),
        (f"v1={payments.signature(SECRET, T, BODY)}", BODY, SECRET, 0, "no timestamp"),
        (f"t={T}", BODY, SECRET, 0, "no v1"),
        (f"t=-{T},v1=00", BODY, SECRET, 0, "malformed timestamp"),
        ("t=1e9,v1=00", BODY, SECRET, 0, "malformed timestamp"),
        (f"t={T},t={T},v1=00", BODY, SECRET, 0, "malformed timestamp"),
        (payments.sign(SECRET, BODY, T), BODY + b" ", SECRET, 0, "does not match"),
        (payments.sign(SECRET, BODY, T), BODY, "whsec_other", 0, "does not match"),
        (payments.sign(SECRET, BODY, T + 1), BODY.replace(b"1", b"2"), SECRET, 0, "not match"),
        (f"t={T},v1=ключ", BODY, SECRET, 0, "does not match"),
        (payments.sign(SECRET, BODY, T), BODY, SECRET, 301, "tolerance"),
        (payments.sign(SECRET, BODY, T), BODY, SECRET, -301, "tolerance"),
    ],
)
def test_bad_signatures(
    header: str | None, body: bytes, secret: str, now_offset: int, why: str
) -> None:
    now = datetime.fromtimestamp(T + now_offset, UTC)
    with pytest.raises(BadSignature, match=why):
        payments.verify(secret, header, body, now)


def test_the_tolerance_is_inclusive_and_configurable() -> None:
    header = payments.sign(SECRET, BODY, T)
    assert payments.verify(SECRET, header, BODY, datetime.fromtimestamp(T + 300, UTC)) == T
    assert payments.verify(SECRET, header, BODY, datetime.fromtimestamp(T - 300, UTC)) == T
    with pytest.raises(BadSignature):
        payments.verify(SECRET, header, BODY, datetime.fromtimestamp(T + 11, UTC), 10)


@given(secret=st.text(min_size=1), body=st.binary(), t=st.integers(0, 10**11))
def test_what_is_signed_verifies_and_one_flipped_byte_does_not(
    secret: str, body: bytes, t: int
) -> None:
    now = datetime.fromtimestamp(t, UTC)
    header = payments.sign(secret, body, t)
    assert payments.verify(secret, header, body, now) == t
    tampered = body[:-1] + bytes([body[-1] ^ 1]) if body else b"x"
    with pytest.raises(BadSignature):
        payments.verify(secret, header, tampered, now)


def test_events_parse_or_are_invalid_input() -> None:
    event = payments.parse_event(
        b'{"id": "evt_1", "type": "payment.succeeded",'
        b' "data": {"email": " a@b.c ", "amount": "100.00", "currency": "cny"}}'
    )
    paid = payments.payment_succeeded(event)
    assert (paid.event_id, paid.email, paid.amount, paid.currency) == (
        "evt_1",
        "a@b.c",
        "100.00",
        "CNY",
    )
    for body, where in (
        (b"{not json", "not JSON"),
        (b"[]", "event"),
        (b'{"type": "x"}', "event.id"),
        (b'{"id": 5, "type": "x"}', "event.id"),
        (b'{"id": "", "type": "x"}', "event.id"),
        ('{"id": "évt", "type": "x"}'.encode(), "printable ASCII"),
        (b'{"id": "e", "type": "x", "data": []}', "event.data"),
    ):
        with pytest.raises(InvalidInput, match=where):
            payments.parse_event(body)
    no_amount = payments.parse_event(b'{"id": "e", "type": "payment.succeeded", "data": {}}')
    with pytest.raises(InvalidInput, match="data.email"):
        payments.payment_succeeded(no_amount)


# -- the idempotency rules (pure parts) ----------------------------------------------------


def test_fingerprint_ignores_key_order_and_whitespace_but_not_values_or_paths() -> None:
    fp = idempotency.fingerprint
    a = fp("POST", "/api/v1/instances", b'{"gpu": "H100", "count": 1}')
    assert a == fp("post", "/api/v1/instances", b'{"count":1,"gpu":"H100"}')
    assert a != fp("POST", "/api/v1/instances", b'{"gpu": "H100", "count": 2}')
    assert a != fp("POST", "/api/v1/instancesx", b'{"gpu": "H100", "count": 1}')
    assert a != fp("PUT", "/api/v1/instances", b'{"gpu": "H100", "count": 1}')
    assert fp("POST", "/x", b"") == fp("POST", "/x", b"  ")
    assert fp("POST", "/x", b"not json") != fp("POST", "/x", b"not  json")
    assert len(a.request_hash) == 64


@pytest.mark.parametrize("key", ["", "k" * 256, "ключ", "a\nb", "tab\t"])
def test_bad_keys_are_invalid_input(key: str) -> None:
    with pytest.raises(InvalidInput, match="Idempotency-Key"):
        idempotency.validate_key(key)


def test_good_keys_pass() -> None:
    for key in ("a", "k" * 255, "550e8400-e29b-41d4-a716-446655440000", "with space ~!"):
        assert idempotency.validate_key(key) == key
