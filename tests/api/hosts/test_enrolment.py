"""Enrolment and the agent's channel: tokens work once and until they expire, a credential
speaks only for its own host, a removed host is refused, and only admins enrol."""

from __future__ import annotations

from tests.api.hosts.conftest import LOST_AFTER, HostsApi, inventory


def test_a_host_joins_once_and_reports_its_gpus(hosts_api: HostsApi) -> None:
    api = hosts_api
    r = api.client.post(
        "/api/v1/admin/hosts", json={"name": "gpu-a", "data_centre": "bj1"}, headers=api.admin
    )
    assert r.status_code == 201, r.text
    enrolled = r.json()
    assert enrolled["host"]["state"] == "waiting"
    assert enrolled["command"].startswith("cardhour agent --server http")
    assert enrolled["token"] in enrolled["command"]
    joined = api.client.post("/api/v1/agent/join", json={"token": enrolled["token"]})
    assert joined.status_code == 200
    assert joined.json()["host"] == "gpu-a"
    again = api.client.post("/api/v1/agent/join", json={"token": enrolled["token"]})
    assert again.status_code == 401
    assert again.json()["error"]["code"] == "unauthorized"
    credential = joined.json()["credential"]
    report = {"host": "gpu-a", "inventory": inventory(host="gpu-a"), "address": "10.1.1.1"}
    headers = {"Authorization": f"Bearer {credential}"}
    answer = api.client.post("/api/v1/agent/report", json=report, headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["containers"] == []
    api.settle()
    hosts = api.client.get("/api/v1/admin/hosts", headers=api.admin).json()
    assert [(h["name"], h["state"], h["gpu"], h["gpus"]) for h in hosts] == [
        ("gpu-a", "ready", "H100", 8)
    ]
    nodes = api.client.get("/api/v1/admin/nodes", headers=api.admin).json()
    assert [(n["id"], n["gpu"], n["gpu_count"], n["schedulable"]) for n in nodes] == [
        ("gpu-a", "H100", 8, True)
    ]
    offers = api.client.get("/api/v1/offers").json()
    assert any(o["gpu"] == "H100" and o["total_gpus"] == 8 for o in offers)


def test_tokens_expire_and_credentials_speak_for_their_host_only(hosts_api: HostsApi) -> None:
    api = hosts_api
    late = api.client.post(
        "/api/v1/admin/hosts", json={"name": "late", "data_centre": "bj1"}, headers=api.admin
    ).json()
    api.clock.advance(api.platform.settings.hosts.join_token_seconds + 1)
    r = api.client.post("/api/v1/agent/join", json={"token": late["token"]})
    assert r.status_code == 401
    assert "expired" in r.json()["error"]["message"]
    assert api.client.post("/api/v1/agent/join", json={"token": "chj_nope"}).status_code == 401
    a = api.enrol("one")
    api.enrol("two")
    other = api.client.post(
        "/api/v1/agent/report",
        json={"host": "two", "containers": []},
        headers={"Authorization": f"Bearer {a.credential}"},
    )
    assert other.status_code == 403
    assert other.json()["error"]["code"] == "forbidden"
    nobody = api.client.post("/api/v1/agent/report", json={"host": "one", "containers": []})
    assert nobody.status_code == 401
    unknown_field = api.client.post(
        "/api/v1/agent/report",
        json={"host": "one", "containers": [], "gpus": 3},
        headers={"Authorization": f"Bearer {a.credential}"},
    )
    assert unknown_field.status_code == 422


def test_removing_a_host_revokes_it_and_takes_it_out_of_the_fleet(hosts_api: HostsApi) -> None:
    api = hosts_api
    agent = api.enrol("gone")
    api.settle()
    r = api.client.delete("/api/v1/admin/hosts/gone", headers=api.admin)
    assert r.status_code == 200
    assert r.json()["state"] == "removed"
    assert api.client.delete("/api/v1/admin/hosts/gone", headers=api.admin).status_code == 200
    refused = api.client.post(
        "/api/v1/agent/report",
        json={"host": "gone", "containers": []},
        headers={"Authorization": f"Bearer {agent.credential}"},
    )
    assert refused.status_code == 401
    api.settle()
    nodes = api.client.get("/api/v1/admin/nodes", headers=api.admin).json()
    assert [(n["id"], n["schedulable"]) for n in nodes] == [("gone", False)]
    # the name can be enrolled again: a new token, a new credential
    again = api.client.post(
        "/api/v1/admin/hosts", json={"name": "gone", "data_centre": "bj1"}, headers=api.admin
    )
    assert again.status_code == 201


def test_enrolment_is_for_admins_and_checks_its_input(hosts_api: HostsApi) -> None:
    api = hosts_api
    user = api.signup()
    body = {"name": "x1", "data_centre": "bj1"}
    assert api.client.post("/api/v1/admin/hosts", json=body, headers=user).status_code == 403
    assert api.client.get("/api/v1/admin/hosts", headers=user).status_code == 403
    assert api.client.post("/api/v1/admin/hosts", json=body).status_code == 401
    bad = [
        {"name": "Bad_Name", "data_centre": "bj1"},
        {"name": "x2", "data_centre": "mars"},
        {"name": "x3", "data_centre": "bj1", "extra": 1},
    ]
    for body in bad:
        r = api.client.post("/api/v1/admin/hosts", json=body, headers=api.admin)
        assert r.status_code == 422, body
    api.client.post(
        "/api/v1/admin/hosts", json={"name": "x4", "data_centre": "bj1"}, headers=api.admin
    )
    dup = api.client.post(
        "/api/v1/admin/hosts", json={"name": "x4", "data_centre": "bj1"}, headers=api.admin
    )
    assert dup.status_code == 409


def test_a_silent_host_is_lost(hosts_api: HostsApi) -> None:
    api = hosts_api
    api.enrol("quiet")
    api.settle()
    api.clock.advance(LOST_AFTER + 1)
    api.settle()
    hosts = api.client.get("/api/v1/admin/hosts", headers=api.admin).json()
    assert hosts[0]["state"] == "lost"
    assert "heartbeat" in hosts[0]["lost_reason"]
    nodes = api.client.get("/api/v1/admin/nodes", headers=api.admin).json()
    assert nodes[0]["schedulable"] is False
