"""Movable instances and the operator's defragmentation plan (`GET /admin/defrag`).

The demo fleet has 8 A800 nodes of 8 GPUs (bj1). Eight A800:7 instances take one node each, so
A800:8 fits nowhere and nothing may move; eight A800:1 then fill the holes, and freeing two nodes
but one GPU each (P keeps a movable A800:1, Q an unmovable one) leaves exactly one plan: move P's
instance to Q, then A800:8 fits on P.
"""

from __future__ import annotations

from tests.conftest import Api

DEFRAG = "/api/v1/admin/defrag"


def _admin(api: Api) -> dict[str, str]:
    email, password = api.platform.bootstrap_admin()
    login = api.client.post("/api/v1/auth/login", json={"email": email, "password": password})
    return {"Authorization": f"Bearer {login.json()['api_key']}"}


def _launch(api: Api, headers: dict[str, str], name: str, count: int, movable: bool) -> dict:
    body = {"gpu": "A800", "count": count, "name": name, "movable": movable}
    r = api.client.post("/api/v1/instances", headers=headers, json=body)
    assert r.status_code == 201, r.text
    assert r.json()["movable"] is movable
    return r.json()


def _run_all(api: Api) -> None:
    """Place what is pending, then let the simulated provisioning (30 s) finish."""
    api.settle()
    api.settle(31)


def _nodes(api: Api, headers: dict[str, str], name: str) -> list[str]:
    inst = api.client.get(f"/api/v1/instances/{name}", headers=headers).json()
    assert inst["status"] == "running", inst
    nodes: list[str] = inst["nodes"]
    return nodes


def _ask(api: Api, headers: dict[str, str], gpu: str) -> dict:
    r = api.client.get(DEFRAG, params={"gpu": gpu}, headers=headers)
    assert r.status_code == 200, r.text
    body: dict = r.json()
    return body


def test_plan_moves_only_movable_instances(api: Api) -> None:
    admin = _admin(api)
    user = api.signup()
    api.top_up(user, "1000.00")
    assert _ask(api, admin, "a800:8") == {
        "request": "A800:8",
        "fits_now": True,
        "moves": [],
        "target_nodes": ["bj1-a800-01"],
        "reason": None,
    }

    for i in range(8):
        _launch(api, user, f"big-{i}", 7, movable=False)
    _run_all(api)
    big = {_nodes(api, user, f"big-{i}")[0]: f"big-{i}" for i in range(8)}
    assert len(big) == 8  # one per A800 node
    stuck = _ask(api, admin, "A800:8")
    assert (stuck["fits_now"], stuck["moves"], stuck["target_nodes"]) == (False, [], [])
    assert "8 hold unmovable containers" in stuck["reason"]

    small = {}
    for i in range(8):
        small[f"small-{i}"] = _launch(api, user, f"small-{i}", 1, movable=i % 2 == 0)
    _run_all(api)
    on_node = {_nodes(api, user, name)[0]: name for name in small}
    assert sorted(on_node) == sorted(big)  # each fills the last GPU of one node
    p = next(n for n, name in on_node.items() if small[name]["movable"])
    q = next(n for n, name in on_node.items() if not small[name]["movable"])
    for node in (p, q):
        r = api.client.delete(f"/api/v1/instances/{big[node]}", headers=user)
        assert r.status_code == 200, r.text
    _run_all(api)

    plan = _ask(api, admin, "A800:8")
    mover = small[on_node[p]]
    assert plan["fits_now"] is False and plan["reason"] is None
    assert len(plan["moves"]) == 1
    move = plan["moves"][0]
    assert (move["instance"], move["from_node"], move["to_node"]) == (mover["id"], p, q)
    assert len(move["gpus"]) == 1
    assert plan["target_nodes"] == [p]  # it held only a movable instance
    # a proposal only: nothing moved
    assert _nodes(api, user, on_node[p]) == [p]


def test_no_plan_when_nothing_may_move(api: Api) -> None:
    admin = _admin(api)
    user = api.signup()
    api.top_up(user, "1000.00")
    for i in range(8):
        _launch(api, user, f"big-{i}", 7, movable=False)
    api.settle()
    body = _ask(api, admin, "A800:8")
    assert body["fits_now"] is False and body["moves"] == [] and body["target_nodes"] == []
    assert body["reason"].startswith("no node can be freed")

    # a count no request can express is a reason too, not an error
    odd = _ask(api, admin, "H100:12")
    assert odd["request"] == "H100:12" and "multiple of 8" in odd["reason"]


def test_defrag_is_admin_only_and_validates_input(api: Api) -> None:
    user = api.signup()
    r = api.client.get(DEFRAG, params={"gpu": "A800:8"}, headers=user)
    assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden")
    r = api.client.get(DEFRAG, params={"gpu": "nonsense!"}, headers=user)
    assert r.status_code == 403  # the role is checked before the input
    assert api.client.get(DEFRAG, params={"gpu": "A800:8"}).status_code == 401
    assert api.client.get(DEFRAG, headers=user).status_code == 403  # no gpu at all: role first
    assert api.client.get(DEFRAG).status_code == 401

    admin = _admin(api)
    for params in ({"gpu": "A800:x"}, {"gpu": "B200:8"}, {"gpu": "A800:0"}, {"gpu": ""}, {}):
        r = api.client.get(DEFRAG, params=params, headers=admin)
        assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_input"), params


def test_movable_defaults_to_false_and_must_be_a_bool(api: Api) -> None:
    user = api.signup()
    r = api.client.post("/api/v1/instances", headers=user, json={"gpu": "A800"})
    assert r.status_code == 201 and r.json()["movable"] is False
    listed = api.client.get("/api/v1/instances", headers=user).json()
    assert [i["movable"] for i in listed] == [False]
    bad = {"gpu": "A800", "movable": "sometimes"}
    r = api.client.post("/api/v1/instances", headers=user, json=bad)
    assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_input")
