"""The image catalog: public, from the fleet file, what `launch --image` accepts."""

from __future__ import annotations

from tests.conftest import Api


def test_images_are_listed_with_versions_and_launchable(api: Api) -> None:
    r = api.client.get("/api/v1/images")  # no key needed
    assert r.status_code == 200
    images = {i["id"]: i for i in r.json()}
    assert set(images) == {"pytorch-2.3-cuda12.3", "llama-factory", "deepspeed", "megatron-lm"}
    base = images["pytorch-2.3-cuda12.3"]
    assert base["default"] and base["versions"] == {
        "pytorch": "2.3.1",
        "cuda": "12.3",
        "nccl": "2.21.5",
    }
    assert [i["id"] for i in r.json() if i["default"]] == ["pytorch-2.3-cuda12.3"]
    headers = api.signup()
    launched = api.client.post(
        "/api/v1/instances", headers=headers, json={"gpu": "RTX4090", "image": "megatron-lm"}
    )
    assert launched.status_code == 201 and launched.json()["image"] == "megatron-lm"
    bad = api.client.post(
        "/api/v1/instances", headers=headers, json={"gpu": "RTX4090", "image": "x"}
    )
    assert (
        bad.status_code == 422
        and "available: pytorch-2.3-cuda12.3" in bad.json()["error"]["message"]
    )
