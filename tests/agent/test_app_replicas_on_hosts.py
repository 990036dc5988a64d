"""A marketplace app replica runs on the host its share of the fleet was placed on (the hosts
backend's default, `marketplace.runtime=auto`): a real container of that host's agent, built
there from the control plane's build context, with exactly the GPU placed, no network, a
read-only root and user 65534, called through the gateway via the agent's token-checked proxy.
A restarted agent adopts it (same port, no duplicate); a lost host's replica is replaced on the
other host; a replica no longer wanted is removed from its host."""

from __future__ import annotations

import io
import json
import tarfile
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from cardhour.backends.apps.calls import Endpoint
from cardhour.backends.apps.hosts import HostLauncher
from cardhour.core.money import Money
from cardhour.db.engine import transaction
from cardhour.db.models import AppReplicaRow
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import ledger
from tests.agent.conftest import LOST_AFTER, Hosts, wait_for
from tests.api.marketplace.test_app_containers import LOCKDOWN
from tests.api.marketplace.test_app_replicas import QUARTER
from tests.api.marketplace.test_marketplace import _package

APP = (
    LOCKDOWN
    + """
import glob


def handle(request):
    return lockdown() | {
        "devices": sorted(glob.glob("/dev/nvidia[0-9]*")),
        "node": os.environ.get("CARDHOUR_NODE"),
        "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
"""
)


@pytest.fixture(autouse=True)
def replicas_on_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The platform's default with the hosts backend (tests/conftest.py says `process`)."""
    monkeypatch.setenv("CARDHOUR_MARKETPLACE__RUNTIME", "auto")


def _signup(hosts: Hosts) -> dict[str, str]:
    body = {"email": f"u{uuid.uuid4().hex[:8]}@example.com", "password": "password123"}
    r = hosts.call("POST", "/auth/signup", json=body)
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['api_key']}"}


def _listed(hosts: Hosts, manifest: str = QUARTER) -> dict[str, str]:
    """A caller with cash, once `doc-search` (`manifest`: a quarter of an H100 per replica)
    is listed."""
    dev, caller = _signup(hosts), _signup(hosts)
    body = {"manifest": manifest, "code_b64": _package(APP)}
    assert hosts.call("POST", "/apps", dev, json=body).status_code == 201
    assert hosts.call("POST", "/apps/doc-search/submit", dev).is_success
    assert hosts.call("POST", "/admin/apps/doc-search/approve", hosts.admin, json={}).is_success
    platform = hosts.platform
    with transaction(platform.sessions) as s:
        now = platform.clock.now()
        user = accounts.authenticate(s, caller["Authorization"].removeprefix("Bearer "), now)
        ledger.top_up(s, user.id, Money.parse("1"), now, f"test-{uuid.uuid4().hex}")
    return caller


def _invoke(hosts: Hosts, caller: dict[str, str]) -> dict[str, Any]:
    r = hosts.call("POST", "/apps/doc-search/invoke", caller, json={"query": "hi"})
    assert r.status_code == 200, r.text
    return dict(r.json()["output"])


def _replica(hosts: Hosts) -> AppReplicaRow:
    with transaction(hosts.platform.sessions) as s:
        (row,) = s.scalars(select(AppReplicaRow))
        s.expunge(row)
        return row


def _endpoint(hosts: Hosts) -> Endpoint:
    (key,) = hosts.platform.app_runtime._pools  # one version
    found = hosts.platform.app_runtime.endpoint(key)
    assert isinstance(found, Endpoint)
    return found


def test_a_replica_runs_on_its_placed_host_with_exactly_its_gpu(hosts: Hosts) -> None:
    assert isinstance(hosts.platform.app_runtime.launcher, HostLauncher)
    hosts.join("a", "127.0.1.41", gpus="H100:2")
    hosts.join("b", "127.0.1.42", gpus="H100:2")
    caller = _listed(hosts)

    output = _invoke(hosts, caller)
    row = _replica(hosts)
    short = row.node_id.removeprefix(f"{hosts.prefix}-")
    assert output == {
        "uid": 65534,
        "network": "Network is unreachable",
        "root": "Read-only file system",
        "devices": [f"/dev/nvidia{row.gpus}"],  # the placed GPU, and no other
        "node": row.node_id,
        "gpus": row.gpus,
    }
    (box,) = hosts.containers(short)
    assert box == f"app-{row.id}.{row.node_id}"
    other = "b" if short == "a" else "a"
    assert hosts.containers(other) == []

    # the agent's proxy lets in only the gateway's calls (its token)
    endpoint = _endpoint(hosts)
    url = f"http://{endpoint.host}:{endpoint.port}/invoke"
    assert endpoint.host == {"a": "127.0.1.41", "b": "127.0.1.42"}[short]
    refused = httpx.post(url, json={}, headers={"X-Cardhour-Replica-Token": "guess"})
    assert refused.status_code == 401
    assert httpx.post(url, json={}).status_code == 401

    # only the placed host's agent gets the build context
    context = f"{hosts.url}/api/v1/agent/app-context"
    query = {"host": row.node_id, "workload": f"app-{row.id}"}
    mine, theirs = _credential(hosts, short), _credential(hosts, other)
    packed = httpx.get(context, params=query, headers=mine)
    assert packed.status_code == 200 and packed.headers["content-type"] == "application/gzip"
    with tarfile.open(fileobj=io.BytesIO(packed.content), mode="r:gz") as archive:
        assert {"./Containerfile", "./app/app.py", "./runner.py"} <= set(archive.getnames())
    assert httpx.get(context, params=query).status_code == 401
    assert httpx.get(context, params=query, headers=theirs).status_code == 403
    elsewhere = {**query, "host": hosts.name(other)}
    assert httpx.get(context, params=elsewhere, headers=theirs).status_code == 404

    # a restarted agent adopts the replica: same container, same port, calls go on
    hosts.kill(short)
    hosts.start_agent(short, endpoint.host, gpus="H100:2")
    wait_for(lambda: _answers(endpoint), 30, "the proxy to open again")
    assert hosts.containers(short) == [box]
    assert _invoke(hosts, caller)["node"] == row.node_id
    assert _endpoint(hosts) == endpoint

    # no longer wanted (its version retired): removed from its host, its share released
    assert hosts.platform.app_runtime.scale_down(serving=[]) == 1
    assert hosts.containers(short) == []
    with transaction(hosts.platform.sessions) as s:
        assert list(s.scalars(select(AppReplicaRow))) == []


def test_a_lost_hosts_replica_is_replaced_on_the_other_host(hosts: Hosts) -> None:
    hosts.join("a", "127.0.1.43", gpus="H100:1")
    hosts.join("b", "127.0.1.44", gpus="H100:1")
    caller = _listed(hosts)
    first = _invoke(hosts, caller)["node"]
    short = first.removeprefix(f"{hosts.prefix}-")
    other = "b" if short == "a" else "a"

    hosts.kill(short)
    wait_for(lambda: not hosts.node(short), LOST_AFTER + 30, "the host to be lost")
    hosts.platform.app_runtime.scale_down()  # the apps reconciler's pass, without waiting
    assert _invoke(hosts, caller)["node"] == hosts.name(other)
    assert len(hosts.containers(other)) == 1


def test_a_replica_that_cannot_be_built_fails_with_the_reason(hosts: Hosts) -> None:
    hosts.join("a", "127.0.1.45", gpus="H100:1")
    caller = _listed(hosts, QUARTER.replace("[numpy]", "[no-such-package==1.0]"))
    r = hosts.call("POST", "/apps/doc-search/invoke", caller, json={"query": "hi"})
    assert r.status_code == 503, r.text
    message = r.json()["error"]["message"]
    assert "did not start" in message and "no-such-package" in message, message
    wait_for(lambda: not hosts.containers("a"), 30, "nothing left on the host")


def _credential(hosts: Hosts, short: str) -> dict[str, str]:
    saved = json.loads((hosts.tmp / f"agent-{short}" / "credential.json").read_text())
    return {"Authorization": f"Bearer {saved['credential']}"}


def _answers(endpoint: Endpoint) -> bool:
    headers = {"X-Cardhour-Replica-Token": endpoint.token}
    try:
        r = httpx.post(f"http://{endpoint.host}:{endpoint.port}/invoke", json={}, headers=headers)
    except httpx.HTTPError:
        return False
    return r.status_code == 200
