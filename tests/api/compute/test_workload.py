"""A renter's workload through the API: the image (a catalog id, or an OCI reference from a
registry the fleet allows), the command, environment variables and ports; refused input is a
422 with the project's error shape, and leaves no instance and no charge."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from cardhour.api.app import create_app
from cardhour.core.clock import ManualClock
from cardhour.platform import Platform
from cardhour.settings import Settings, default_fleet_text
from tests.conftest import Api

REGISTRIES = ["docker.io/vllm", "registry.example.com/team"]


@pytest.fixture
def api(database_url: str, tmp_path: Path, clock: ManualClock) -> Iterator[Api]:
    """The demo fleet, allowing renters' images from `REGISTRIES`."""
    fleet = yaml.safe_load(default_fleet_text())
    fleet["registries"] = REGISTRIES
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet))
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        fleet_file=path,
        sim={"provision_seconds": 30},
    )
    platform = Platform(settings, clock=clock)
    try:
        with TestClient(create_app(platform)) as client:
            yield Api(client, platform, clock)
    finally:
        platform.stop()


def _post(api: Api, headers: dict[str, str], **body: object):  # noqa: ANN202 - httpx.Response
    return api.client.post("/api/v1/instances", headers=headers, json={"gpu": "RTX4090", **body})


def test_a_renters_image_command_env_and_ports_are_stored_and_shown(api: Api) -> None:
    headers = api.signup()
    env = {"MODEL": "meta-llama/Llama-3-8B", "HF_HOME": "/models", "a_b": ""}
    created = _post(
        api,
        headers,
        name="serve",
        image="vllm/vllm-openai:v0.5.4",
        command="python -m vllm.entrypoints.openai.api_server --port 8000",
        env=env,
        ports=[8000, 8888],
    )
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["image"] == "docker.io/vllm/vllm-openai:v0.5.4"  # stored fully qualified
    assert body["command"] == "python -m vllm.entrypoints.openai.api_server --port 8000"
    assert body["env"] == env and list(body["env"]) == list(env)  # the order given
    assert body["ports"] == [8000, 8888]
    assert (body["ssh"], body["published"]) == (None, {})  # nothing runs yet
    for shown in (
        api.client.get("/api/v1/instances/serve", headers=headers).json(),
        api.client.get("/api/v1/instances", headers=headers).json()[0],
    ):
        for key in ("image", "command", "env", "ports"):
            assert shown[key] == body[key], key

    api.settle()  # placed and launched
    api.settle(30)  # the sim backend has it up
    running = api.client.get("/api/v1/instances/serve", headers=headers).json()
    assert running["status"] == "running", running["status_reason"]
    conn = running["connection"]
    assert running["ssh"] == {"host": conn["host"], "port": 22, "user": "root"}
    assert conn["ssh"] == f"ssh -p 22 root@{conn['host']}"  # the backend's keys stay as they were
    assert running["published"] == {}  # the simulator publishes nothing


def test_catalog_images_and_registry_prefixes(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "100")
    cases = {
        "megatron-lm": "megatron-lm",
        "registry.example.com/team/trainer@sha256:" + "0" * 64: "registry.example.com/team/"
        "trainer@sha256:" + "0" * 64,
        "registry.example.com/team/sub/x:1": "registry.example.com/team/sub/x:1",
    }
    for n, (given, stored) in enumerate(cases.items()):
        r = _post(api, headers, name=f"i{n}", image=given)
        assert (r.status_code, r.json()["image"]) == (201, stored), r.text
    images = api.client.get("/api/v1/images").json()
    assert images[0]["ref"] == "localhost/cardhour/pytorch-2.3-cuda12.3:latest"


def _refused(api: Api, headers: dict[str, str], body: dict[str, object]) -> str:
    r = api.client.post("/api/v1/instances", headers=headers, json={"gpu": "RTX4090", **body})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_input"
    return str(error["message"])


def test_refused_input_is_a_422_and_leaves_no_instance_and_no_charge(api: Api) -> None:
    headers = api.signup()
    before = api.client.get("/api/v1/balance", headers=headers).json()
    cases: list[tuple[dict[str, object], str]] = [
        (
            {"image": "docker.io/library/ubuntu:24.04"},
            "unknown image 'docker.io/library/ubuntu:24.04': not in the catalog (available: "
            "pytorch-2.3-cuda12.3, llama-factory, deepspeed, megatron-lm), and "
            "docker.io/library/ubuntu is not from an allowed registry (allowed registries: "
            "docker.io/vllm, registry.example.com/team)",
        ),
        ({"image": "registry.example.com/teammate/x"}, "not from an allowed registry"),
        ({"image": "Ubuntu Latest"}, "not an OCI image reference ([registry/]repository"),
        ({"image": "x" * 256}, "image: String should have at most 255 characters"),
        ({"gpus": 1}, "unknown field 'gpus'"),
        ({"env": {"A-B": "1"}}, "env: 'A-B' is not a variable name"),
        ({"env": {"CARDHOUR_API_KEY": "1"}}, "env: CARDHOUR_API_KEY is reserved"),
        ({"env": {"A": 1}}, "env.A: Input should be a valid string"),
        ({"env": {"A": "a\u0000b"}}, "env: the value of A contains a NUL character"),
        ({"env": {f"V{i}": "" for i in range(65)}}, "env: 65 variables, at most 64"),
        ({"ports": [22]}, "ports: 22 is the instance's sshd; publish another port"),
        ({"ports": [8888, 8888]}, "ports: 8888 is listed twice"),
        ({"ports": list(range(8000, 8017))}, "ports: 17 ports, at most 16"),
        ({"ports": [70000]}, "ports: 70000 is not a port (1-65535)"),
        ({"ports": ["8888"]}, "ports.0: Input should be a valid integer"),
        ({"command": "x" * 4097}, "command: 4097 characters, at most 4096"),
    ]
    for body, message in cases:
        assert message in _refused(api, headers, body), body
    assert api.client.get("/api/v1/instances?all=true", headers=headers).json() == []
    assert api.client.get("/api/v1/balance", headers=headers).json() == before


def test_the_typed_client_sends_the_new_fields(api: Api) -> None:
    """`CardhourClient.create_instance` dumps the whole body: the server accepts it as is."""
    from cardhour.api.schemas import InstanceCreate

    headers = api.signup()
    body = InstanceCreate(gpu="RTX4090", env={"A": "1"}, ports=[8888], command="sleep 1")
    r = api.client.post("/api/v1/instances", headers=headers, json=body.model_dump())
    assert r.status_code == 201, r.text
    assert (r.json()["env"], r.json()["ports"]) == ({"A": "1"}, [8888])
