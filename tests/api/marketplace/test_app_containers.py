"""A marketplace app replica runs as a real container and is called through the gateway (both
databases), on the platform's default runtime: the app's own image, user 65534, no network, a
read-only root; the caller is charged per call, a failing app is not charged; the replica's
container goes when it scales down, and when the platform stops."""

from __future__ import annotations

from decimal import Decimal

import pytest

from cardhour.backends.apps.container import LABEL_DIR, LABEL_VERSION, ContainerLauncher
from cardhour.db.engine import transaction
from cardhour.runtime.podman import PodmanRuntime
from cardhour.services.billing import ledger
from tests.api.marketplace.test_app_replicas import _listed
from tests.api.marketplace.test_marketplace import MANIFEST
from tests.conftest import Api
from tests.runtime.conftest import CONF, runtime  # noqa: F401 - the session's Podman, images built

#: app code telling what a replica may do: its uid, whether it reaches a network address,
#: whether its root is writable (the replicas' lock-down, from inside)
LOCKDOWN = """
import os, socket


def lockdown():
    try:
        socket.create_connection(("10.255.255.1", 80), timeout=2)
        network = "reachable"
    except OSError as exc:
        network = exc.strerror
    try:
        open("/app/written", "w")
        root = "writable"
    except OSError as exc:
        root = exc.strerror
    return {"uid": os.getuid(), "network": network, "root": root}
"""
APP = (
    LOCKDOWN
    + """

def handle(request):
    if request.get("fail"):
        raise RuntimeError("the model is not loaded")
    return lockdown() | {"query": request["query"]}
"""
)


@pytest.fixture(autouse=True)
def container_runtime(
    runtime: PodmanRuntime,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The platform's own default (tests/conftest.py runs replicas as processes elsewhere)."""
    monkeypatch.setenv("CARDHOUR_MARKETPLACE__RUNTIME", "container")
    monkeypatch.setenv("CARDHOUR_MARKETPLACE__CONTAINERS_CONF", str(CONF))


def test_an_app_replica_is_a_container_called_through_the_gateway(
    api: Api,
    runtime: PodmanRuntime,  # noqa: F811
) -> None:
    launcher = api.platform.app_runtime.launcher
    assert isinstance(launcher, ContainerLauncher)
    caller = _listed(api, MANIFEST, APP)

    r = api.client.post("/api/v1/apps/doc-search/invoke", headers=caller, json={"query": "hi"})
    assert r.status_code == 200, r.text
    assert r.json()["output"] == {
        "uid": 65534,
        "network": "Network is unreachable",
        "root": "Read-only file system",
        "query": "hi",
    }
    (replica,) = runtime.list({LABEL_DIR: launcher.dir_label})
    assert replica.state == "running"
    version = replica.labels[LABEL_VERSION]  # `<app id>:1`: its own image, from the app base
    image = runtime.image_labels(f"localhost/cardhour-app/{version.replace(':1', ':v1')}")
    assert image is not None and image[LABEL_VERSION] == version

    failed = api.client.post(
        "/api/v1/apps/doc-search/invoke", headers=caller, json={"query": "x", "fail": True}
    )
    assert failed.status_code == 502
    assert "RuntimeError: the model is not loaded" in failed.json()["error"]["message"]
    api.settle()  # the gateway's calls posted to the ledger
    balance = api.client.get("/api/v1/balance", headers=caller).json()
    assert Decimal(balance["cash"]) == Decimal("1") - Decimal("0.02")  # the failure is free
    with transaction(api.platform.sessions) as s:
        assert ledger.verify(s).balanced

    api.settle(61)  # idle past idle_seconds: scaled to zero, the container removed
    assert api.client.get("/api/v1/apps/doc-search").json()["replicas"] == 0
    assert runtime.list({LABEL_DIR: launcher.dir_label}) == []
    r = api.client.post("/api/v1/apps/doc-search/invoke", headers=caller, json={"query": "again"})
    assert r.status_code == 200  # a cold start from the built image
    api.platform.stop()
    assert runtime.list({LABEL_DIR: launcher.dir_label}) == []
