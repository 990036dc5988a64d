"""`Idempotency-Key` on launch, stop and start (both databases)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.conftest import Api

KEY = "Idempotency-Key"


def _post(
    api: Api, headers: dict[str, str], path: str, key: str | None, body: object = None
) -> httpx.Response:
    sent = {**headers, KEY: key} if key is not None else headers
    return api.client.post(f"/api/v1{path}", headers=sent, json=body)


def _instances(api: Api, headers: dict[str, str]) -> list[dict]:
    r = api.client.get("/api/v1/instances", headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_retry_with_the_same_key_and_body_replays_the_first_launch(api: Api) -> None:
    user = api.signup()
    body = {"gpu": "H100", "count": 1, "name": "once"}
    first = _post(api, user, "/instances", "launch-1", body)
    assert first.status_code == 201, first.text
    assert "Idempotent-Replayed" not in first.headers
    api.clock.advance(5)
    again = _post(api, user, "/instances", "launch-1", body)
    assert (again.status_code, again.content) == (201, first.content)
    assert again.headers["Idempotent-Replayed"] == "true"
    # the same JSON in another key order and spacing is the same request
    reordered = api.client.post(
        "/api/v1/instances",
        headers={**user, KEY: "launch-1", "Content-Type": "application/json"},
        content=b'{ "name": "once", "count": 1, "gpu": "H100" }',
    )
    assert (reordered.status_code, reordered.content) == (201, first.content)
    assert [i["id"] for i in _instances(api, user)] == [first.json()["id"]]
    # without a key a second request is a second launch (here refused: the name is taken)
    assert _post(api, user, "/instances", None, body).status_code == 409


def test_the_same_key_for_another_request_is_409(api: Api) -> None:
    user = api.signup()
    first = _post(api, user, "/instances", "k1", {"gpu": "H100", "name": "a"})
    assert first.status_code == 201, first.text
    for path, body in (
        ("/instances", {"gpu": "H100", "name": "b"}),
        ("/instances", {"gpu": "H100", "name": "a", "count": 1}),  # defaults count: sent differs
        ("/instances/a/stop", None),
    ):
        r = _post(api, user, path, "k1", body)
        assert (r.status_code, r.json()["error"]["code"]) == (409, "idempotency_key_reused"), path
        assert "POST /api/v1/instances" in r.json()["error"]["message"]
    assert len(_instances(api, user)) == 1


def test_keys_are_scoped_per_user(api: Api) -> None:
    ada, bob = api.signup(), api.signup()
    body = {"gpu": "H100", "name": "same"}
    a = _post(api, ada, "/instances", "shared-key", body)
    b = _post(api, bob, "/instances", "shared-key", body)
    assert (a.status_code, b.status_code) == (201, 201)
    assert a.json()["id"] != b.json()["id"]
    assert len(_instances(api, ada)) == len(_instances(api, bob)) == 1
    # a different body under bob's key is bob's problem only
    c = _post(api, bob, "/instances", "shared-key", {"gpu": "A800"})
    assert c.json()["error"]["code"] == "idempotency_key_reused"
    assert _post(api, ada, "/instances", "shared-key", body).content == a.content


def test_errors_are_not_stored_so_a_retry_runs_again(api: Api) -> None:
    user = api.signup()
    body = {"gpu": "H100", "count": 8}  # 15.20 per hour: more than the 10.00 trial credit
    refused = _post(api, user, "/instances", "big", body)
    assert (refused.status_code, refused.json()["error"]["code"]) == (402, "insufficient_balance")
    api.top_up(user, "20.00")
    launched = _post(api, user, "/instances", "big", body)
    assert launched.status_code == 201, launched.text
    assert _post(api, user, "/instances", "big", body).content == launched.content
    assert len(_instances(api, user)) == 1


def test_stop_and_start_replay_the_first_answer(api: Api) -> None:
    user = api.signup()
    assert _post(api, user, "/instances", None, {"gpu": "H100", "name": "s"}).status_code == 201
    api.settle()
    api.settle(30)
    stop = _post(api, user, "/instances/s/stop", "stop-1")
    assert (stop.status_code, stop.json()["status"]) == (200, "stopping")
    api.settle()
    replay = _post(api, user, "/instances/s/stop", "stop-1")
    assert (replay.status_code, replay.content) == (200, stop.content)  # the first answer...
    fresh = _post(api, user, "/instances/s/stop", "stop-2")
    assert (fresh.status_code, fresh.json()["status"]) == (200, "stopped")  # ...not the live one
    start = _post(api, user, "/instances/s/start", "start-1")
    assert (start.status_code, start.json()["status"]) == (200, "pending")
    assert _post(api, user, "/instances/s/start", "start-1").content == start.content
    assert len(_instances(api, user)) == 1


def test_keys_expire_after_24_hours(api: Api) -> None:
    user = api.signup()
    body = {"gpu": "H100"}
    first = _post(api, user, "/instances", "daily", body)
    api.clock.advance(hours=24, seconds=-1)
    assert _post(api, user, "/instances", "daily", body).content == first.content
    api.clock.advance(seconds=1)
    second = _post(api, user, "/instances", "daily", body)
    assert second.status_code == 201 and second.json()["id"] != first.json()["id"]
    assert _post(api, user, "/instances", "daily", body).content == second.content
    assert len(_instances(api, user)) == 2


def test_bad_keys_are_422(api: Api) -> None:
    user = api.signup()
    for key in ("", "k" * 256, "tab\there"):
        r = _post(api, user, "/instances", key, {"gpu": "H100"})
        assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_input"), key
    raw = httpx.Headers({**user, KEY: "ключ".encode()})
    r = api.client.post("/api/v1/instances", headers=raw, json={"gpu": "H100"})
    assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_input")
    assert _instances(api, user) == []
    assert _post(api, {}, "/instances", "k", {"gpu": "H100"}).status_code == 401


def test_concurrent_duplicates_launch_once(api: Api) -> None:
    """Parallel requests with one key: one instance, every caller gets its response (PostgreSQL:
    the losers wait on the key's unique index, then replay; SQLite: BEGIN IMMEDIATE)."""
    user = api.signup()
    body = {"gpu": "H100", "name": "racer"}

    def launch(_: int) -> httpx.Response:
        return _post(api, user, "/instances", "race", body)

    with ThreadPoolExecutor(max_workers=8) as pool:
        responses = list(pool.map(launch, range(16)))
    assert {r.status_code for r in responses} == {201}, [r.text for r in responses]
    assert len({r.content for r in responses}) == 1
    assert sum("Idempotent-Replayed" in r.headers for r in responses) == 15
    assert len(_instances(api, user)) == 1


def test_concurrent_requests_with_one_key_and_different_bodies(api: Api) -> None:
    user = api.signup()

    def launch(i: int) -> httpx.Response:
        return _post(api, user, "/instances", "mixed", {"gpu": "H100", "name": f"n{i % 2}"})

    with ThreadPoolExecutor(max_workers=8) as pool:
        responses = list(pool.map(launch, range(12)))
    codes = sorted(r.status_code for r in responses)
    assert codes == [201] * 6 + [409] * 6, [r.text for r in responses]
    assert {r.json()["error"]["code"] for r in responses if r.status_code == 409} == {
        "idempotency_key_reused"
    }
    assert len(_instances(api, user)) == 1
