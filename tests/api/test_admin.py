"""Admin routes need the admin role."""

from __future__ import annotations

from tests.conftest import Api


def test_fleet_view_is_admin_only(api: Api) -> None:
    user = api.signup()
    r = api.client.get("/api/v1/admin/nodes", headers=user)
    assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden")
    assert api.client.get("/api/v1/admin/nodes").status_code == 401

    email, password = api.platform.bootstrap_admin()
    login = api.client.post("/api/v1/auth/login", json={"email": email, "password": password})
    admin = {"Authorization": f"Bearer {login.json()['api_key']}"}
    assert login.json()["user"]["role"] == "admin"

    api.client.post("/api/v1/instances", headers=user, json={"gpu": "A800", "count": 2})
    api.settle()
    nodes = api.client.get("/api/v1/admin/nodes", headers=admin).json()
    assert len(nodes) == 44
    busy = [n for n in nodes if n["used_gpus"]]
    assert [(n["gpu"], n["used_gpus"], n["free_gpus"]) for n in busy] == [("A800", [0, 1], 6)]
