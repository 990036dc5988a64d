"""App replicas are containers on the fleet (both databases): the scheduler places each one
(a quarter of an H100 here) before it starts, instances and other replicas see that capacity
as taken, the share is released when the replica stops, and the share of a replica whose
process died expires; an app asking for a GPU the fleet lacks gets the scheduler's reason."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import select

from cardhour.db.engine import transaction
from cardhour.db.models import AppReplicaRow
from cardhour.services.compute import fleet
from cardhour.services.marketplace import replicas as app_replicas
from tests.api.marketplace.test_marketplace import MANIFEST, _admin, _package
from tests.conftest import Api

WHERE = """
import os
import time


def handle(request):
    time.sleep(float(request.get("sleep", 0)))
    names = ("CARDHOUR_NODE", "CUDA_VISIBLE_DEVICES", "CARDHOUR_GPU_MILLI")
    return {k: os.environ.get(k) for k in names}
"""
QUARTER = MANIFEST.replace(
    "scaling:", "resources: {gpu: H100, milli_gpu: 250, memory_gb: 8}\nscaling:"
)


def _listed(api: Api, manifest: str, code: str = WHERE) -> dict[str, str]:
    """A caller with 1 CNY of cash, once `doc-search` (`manifest`, `code`) is listed."""
    dev, caller, admin = api.signup(), api.signup(), _admin(api)
    body = {"manifest": manifest, "code_b64": _package(code)}
    assert api.client.post("/api/v1/apps", headers=dev, json=body).status_code == 201
    api.client.post("/api/v1/apps/doc-search/submit", headers=dev)
    assert api.client.post(
        "/api/v1/admin/apps/doc-search/approve", headers=admin, json={}
    ).is_success
    api.top_up(caller, "1")
    return caller


def _rows(api: Api) -> list[AppReplicaRow]:
    with transaction(api.platform.sessions) as s:
        return list(s.scalars(select(AppReplicaRow).order_by(AppReplicaRow.id)))


def _free_milli(api: Api, node: str, gpu: int) -> int:
    with transaction(api.platform.sessions) as s:
        state = fleet.load(s, api.platform.catalog).state
    return int(state.gpu_free[state.index[node], gpu])


def test_replicas_are_placed_held_and_released(api: Api) -> None:
    caller = _listed(api, QUARTER)
    r = api.client.post("/api/v1/apps/doc-search/invoke", headers=caller, json={})
    assert r.status_code == 200, r.text
    (row,) = _rows(api)
    assert (row.milli, row.memory_mib, row.cpu_milli) == (250, 8 * 1024, 1000)
    gpu = int(row.gpus)
    assert r.json()["output"] == {
        "CARDHOUR_NODE": row.node_id,
        "CUDA_VISIBLE_DEVICES": str(gpu),
        "CARDHOUR_GPU_MILLI": "250",
    }
    assert _free_milli(api, row.node_id, gpu) == 750  # instances see 3/4 of that GPU
    admin = _admin(api)  # the operator's fleet view shows the share, and the card as not free
    listed = {n["id"]: n for n in api.client.get("/api/v1/admin/nodes", headers=admin).json()}
    node = listed[row.node_id]
    assert node["gpu"] == "H100" and node["used_gpus"] == []
    assert node["app_replicas"] == [
        {"replica": row.id, "app": "doc-search", "version": 1, "gpus": [gpu], "gpu_milli": 250,
         "cpu_milli": 1000, "memory_mib": 8 * 1024}
    ]  # fmt: skip
    assert node["free_gpus"] == node["gpu_count"] - 1

    # two calls at once on target_concurrency 1: a second replica, placed too
    def slow(_: int) -> int:
        return api.client.post(
            "/api/v1/apps/doc-search/invoke", headers=caller, json={"sleep": 1}
        ).status_code

    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(slow, range(2))) == [200, 200]
    rows = _rows(api)
    assert len(rows) == 2
    for r2 in rows:
        held = sum(x.milli for x in rows if (x.node_id, x.gpus) == (r2.node_id, r2.gpus))
        assert _free_milli(api, r2.node_id, int(r2.gpus)) == 1000 - held

    api.settle(61)  # idle past idle_seconds: scaled to zero, the shares released
    assert _rows(api) == []
    assert _free_milli(api, row.node_id, gpu) == 1000


def test_a_dead_processs_share_expires(api: Api) -> None:
    from cardhour.core.apps import Resources

    with transaction(api.platform.sessions) as s:
        placed = app_replicas.place(
            s, api.platform.catalog, api.platform.policy, "gone:1",
            Resources(gpu="H100", milli_gpu=500), "dead-runtime", api.clock.now(),
        )  # fmt: skip
    assert placed is not None
    assert _free_milli(api, placed.node, placed.gpus[0]) == 500
    api.settle(30)
    assert len(_rows(api)) == 1  # not yet
    api.settle(31)
    assert _rows(api) == []
    assert _free_milli(api, placed.node, placed.gpus[0]) == 1000


def test_a_gpu_the_fleet_lacks_is_refused_with_the_schedulers_reason(api: Api) -> None:
    caller = _listed(api, QUARTER.replace("gpu: H100", "gpu: B300"))
    r = api.client.post("/api/v1/apps/doc-search/invoke", headers=caller, json={})
    assert r.status_code == 503
    error = r.json()["error"]
    assert error["code"] == "no_capacity" and "wrong GPU model" in error["message"], error
    assert _rows(api) == []


def test_replicas_of_a_version_no_longer_served_and_without_a_share_are_stopped(
    api: Api,
) -> None:
    keep_one = QUARTER.replace("min_replicas: 0", "min_replicas: 1")
    caller = _listed(api, keep_one)
    assert api.client.post("/api/v1/apps/doc-search/invoke", headers=caller, json={}).is_success
    api.settle(120)  # idle, but min_replicas keeps one
    (first,) = _rows(api)
    runtime = api.platform.app_runtime
    assert [p.replica_id for p in runtime.placed()] == [first.id]

    with transaction(api.platform.sessions) as s:  # its share is gone (it expired meanwhile)
        app_replicas.release(s, first.id)
    api.settle()
    (second,) = _rows(api)  # stopped: the capacity is not its own any more; min_replicas
    assert second.id != first.id  # brings up another, placed anew
    assert [p.replica_id for p in runtime.placed()] == [second.id]
    dev_app = second.app_key
    with transaction(api.platform.sessions) as s:
        from cardhour.db.models import AppRow

        app = s.scalar(select(AppRow))
        assert app is not None
        app.status = "delisted"  # what an operator's delisting leaves
    api.settle()
    assert runtime.placed() == [] and _rows(api) == []  # retired: no version of it serves
    assert runtime.replicas(dev_app) == 0


def test_min_replicas_are_started_before_any_call(api: Api) -> None:
    _listed(api, QUARTER.replace("min_replicas: 0", "min_replicas: 1"))
    api.settle()
    (row,) = _rows(api)
    assert [p.replica_id for p in api.platform.app_runtime.placed()] == [row.id]
    assert _free_milli(api, row.node_id, int(row.gpus)) == 750
