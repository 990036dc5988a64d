"""Hostile or odd input gets a 4xx with a code, never a 500, on both databases."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import pytest

from tests.conftest import Api


@pytest.mark.parametrize(
    "body",
    [
        {"email": "a\x00@b.cd", "password": "password123"},
        {"email": "a@b\n.cd", "password": "password123"},
        {"email": "a@b.cd", "password": "x" * 2000},
        {"email": "a@b.cd"},
        [],
    ],
)
def test_bad_signups_are_422(api: Api, body: object) -> None:
    r = api.client.post("/api/v1/auth/signup", json=body)
    assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_input"), r.text
    assert r.json()["error"]["message"]


def test_bad_logins_are_401_or_422(api: Api) -> None:
    r = api.client.post("/api/v1/auth/login", json={"email": "a\x00@b.cd", "password": "x"})
    assert r.status_code == 401
    api.signup("k@example.com")
    body = {"email": "k@example.com", "password": "password123", "key_name": "a\x00b"}
    assert api.client.post("/api/v1/auth/login", json=body).status_code == 422


@pytest.mark.parametrize(
    "body",
    [
        {"gpu": "H100", "count": True},
        {"gpu": "H100", "count": "2"},
        {"gpu": "H100", "name": "abc\n"},
        {"gpu": "H100", "name": "ünïcode"},
        {"gpu": "H100", "ssh_key": "ssh-ed25519 AAAA comment\x00x"},
        {"gpu": "H100:" + "9" * 5000},
        {"gpu": "\x00"},
    ],
)
def test_bad_launches_are_422(api: Api, body: dict) -> None:
    headers = api.signup()
    r = api.client.post("/api/v1/instances", headers=headers, json=body)
    assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_input"), r.text


@pytest.mark.parametrize("ident", ["a%00b", "x" * 300, "..%2F..", "%E2%98%83"])
def test_odd_instance_idents_are_404(api: Api, ident: str) -> None:
    headers = api.signup()
    r = api.client.get(f"/api/v1/instances/{ident}", headers=headers)
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found"), r.text


def test_offers_with_absurd_counts_are_422(api: Api) -> None:
    for params in ({"gpu": "H100:" + "9" * 5000}, {"gpu": "H100", "count": 10**9}):
        assert api.client.get("/api/v1/offers", params=params).status_code == 422


def test_parallel_launches_with_one_name_create_one_instance(api: Api) -> None:
    headers = api.signup()

    def launch(_: int) -> int:
        body = {"gpu": "RTX4090", "name": "dup"}
        return api.client.post("/api/v1/instances", headers=headers, json=body).status_code

    with ThreadPoolExecutor(max_workers=6) as pool:
        codes = list(pool.map(launch, range(6)))
    assert codes.count(201) == 1 and set(codes) == {201, 409}, codes


def test_timestamps_carry_a_timezone(api: Api) -> None:
    headers = api.signup()
    api.client.post("/api/v1/instances", headers=headers, json={"gpu": "A800", "name": "tz"})
    shown = api.client.get("/api/v1/instances/tz", headers=headers).json()
    for value in (shown["created_at"], shown["updated_at"], shown["events"][0]["at"]):
        assert datetime.fromisoformat(value).utcoffset() is not None, value


def test_a_lone_surrogate_with_an_idempotency_key_is_422_not_500(api: Api) -> None:
    headers = api.signup() | {"Idempotency-Key": "k-1", "Content-Type": "application/json"}
    body = b'{"gpu": "H100", "ssh_key": "ssh-ed25519 AAAA \\ud800"}'
    r = api.client.post("/api/v1/instances", headers=headers, content=body)
    assert r.status_code == 422, r.text
