"""Model-weight cache: offers say where weights are cached; a launch asking for weights lands
where they are when it can, else elsewhere with the copy time said; unknown weights are a 422."""

from __future__ import annotations

from typing import Any

from tests.conftest import Api


def _show(api: Api, headers: dict[str, str], name: str) -> dict[str, Any]:
    return api.client.get(f"/api/v1/instances/{name}", headers=headers).json()


def test_weights_in_offers_and_placement(api: Api) -> None:
    offers = api.client.get("/api/v1/offers", params={"gpu": "H100", "weights": "llama3-70b"})
    assert offers.status_code == 200, offers.text
    by_dc = {o["data_centre"]: o["weights"] for o in offers.json()}
    assert by_dc["bj1"] == {
        "id": "llama3-70b",
        "mount": "/models/llama3-70b",
        "local": True,
        "copy_seconds": 0,
    }
    assert (
        by_dc["wh1"]["local"] is False and by_dc["wh1"]["copy_seconds"] == 113
    )  # 141 GB at 10 Gb/s
    bad = api.client.get("/api/v1/offers", params={"gpu": "H100", "weights": "gpt-5"})
    assert bad.status_code == 422 and "cached: llama3-8b" in bad.json()["error"]["message"]

    headers = api.signup()
    api.top_up(headers, "1000")
    body = {"gpu": "H100", "count": 8, "name": "tuned", "weights": "llama3-70b"}
    assert api.client.post("/api/v1/instances", headers=headers, json=body).status_code == 201
    api.settle()
    api.settle(30)
    tuned = _show(api, headers, "tuned")
    assert tuned["data_centre"] == "bj1" and tuned["weights"]["local"] is True
    assert tuned["status"] == "running"
    assert tuned["connection"]["weights"] == {
        "id": "llama3-70b",
        "mount": "/models/llama3-70b",
        "copied_in": False,
    }
    assert any("weights llama3-70b cached here" in (e["reason"] or "") for e in tuned["events"])

    # bj1 full: the next one lands in wh1 and says the weights are copied in first
    fill = {"gpu": "H100", "count": 8, "nodes": 15, "name": "fill"}
    assert api.client.post("/api/v1/instances", headers=headers, json=fill).status_code == 201
    api.settle()
    assert _show(api, headers, "fill")["data_centre"] == "bj1"
    body |= {"name": "far"}
    assert api.client.post("/api/v1/instances", headers=headers, json=body).status_code == 201
    api.settle()
    far = _show(api, headers, "far")
    assert far["data_centre"] == "wh1"
    assert far["weights"] == {
        "id": "llama3-70b",
        "mount": "/models/llama3-70b",
        "local": False,
        "copy_seconds": 113,
    }
    api.settle(30)  # booted, but the weights are still on their way (simulated copy)
    assert _show(api, headers, "far")["status"] == "provisioning"
    api.settle(113)
    far = _show(api, headers, "far")
    assert far["status"] == "running"
    assert far["connection"]["weights"]["copied_in"] is True
    booting = next(s for s in far["stages"] if s["name"] == "booting")
    assert booting["detail"]["weights"]["copy_seconds"] == 113
    bad_launch = api.client.post(
        "/api/v1/instances", headers=headers, json={"gpu": "H100", "weights": "nope"}
    )
    assert bad_launch.status_code == 422


def test_bare_metal_lands_on_an_empty_node_only(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "100")
    small = {"gpu": "A800", "count": 1, "name": "small"}
    assert api.client.post("/api/v1/instances", headers=headers, json=small).status_code == 201
    api.settle()
    busy = _show(api, headers, "small")["nodes"]
    metal = {"gpu": "A800", "count": 8, "name": "metal", "bare_metal": True}
    assert api.client.post("/api/v1/instances", headers=headers, json=metal).status_code == 201
    api.settle()
    api.settle(30)
    shown = _show(api, headers, "metal")
    assert shown["status"] == "running" and shown["bare_metal"] is True
    assert len(shown["nodes"]) == 1 and shown["nodes"] != busy
    partial = {"gpu": "A800", "count": 4, "bare_metal": True}
    r = api.client.post("/api/v1/instances", headers=headers, json=partial)
    assert r.status_code == 422 and "bare metal takes whole nodes" in r.json()["error"]["message"]
