"""The readiness gate on the `sim` backend (both databases): a 2-node H100 cluster goes through
every stage to `ready` with nccl-tests figures and bills only from there; a node made to fail
the gate is drained and replaced; a cross-node failure fails the instance."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from cardhour.backends.sim.backend import SimBackend
from cardhour.core.readiness import STAGES
from cardhour.db.engine import transaction
from cardhour.db.models import NodeRow
from cardhour.services.billing import ledger
from tests.conftest import Api


def _launch(
    api: Api, headers: dict[str, str], count: int, name: str, nodes: int = 1
) -> dict[str, Any]:
    body = {"gpu": "H100", "count": count, "name": name, "nodes": nodes}
    r = api.client.post("/api/v1/instances", headers=headers, json=body)
    assert r.status_code == 201, r.text
    return r.json()


def _show(api: Api, headers: dict[str, str], name: str) -> dict[str, Any]:
    r = api.client.get(f"/api/v1/instances/{name}", headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def test_two_node_cluster_passes_every_stage_then_bills(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "200")
    _launch(api, headers, 8, "pair", nodes=2)
    api.settle()
    placed = _show(api, headers, "pair")
    assert placed["status"] == "provisioning" and len(placed["nodes"]) == 2
    early = api.client.get("/api/v1/instances/pair/slurm", headers=headers)
    assert (early.status_code, early.json()["error"]["code"]) == (409, "conflict")
    assert [(s["name"], s["outcome"]) for s in placed["stages"]] == [
        ("allocated", "ok"),
        ("booting", None),
    ]
    api.settle(30)  # the simulated boot
    ready = _show(api, headers, "pair")
    assert ready["status"] == "running"
    assert [s["name"] for s in ready["stages"]] == list(STAGES)
    assert all(s["outcome"] == "ok" for s in ready["stages"] if s["name"] != "keys_injected")
    assert ready["stages"][2]["outcome"] == "skipped"  # no SSH key on the account
    gate = ready["gate"]
    assert set(gate["nccl_busbw_gbps"]) == set(ready["nodes"])
    assert all(v > 400 for v in gate["nccl_busbw_gbps"].values())  # modelled ~477 GB/s
    assert gate["thresholds_gbps"] == {n: 235.0 for n in ready["nodes"]}
    assert gate["across_nodes_threshold_gbps"] == 120.0  # 0.6 × 8 × 200 Gb/s ÷ 8
    assert 180 < gate["across_nodes_gbps"] < 190  # 94% of the rails' line rate
    head, worker = ready["cluster"]["nodes"]
    assert (head["hostname"], worker["hostname"], worker["env"]["NODE_RANK"]) == (
        "pair",
        "pair-worker1",
        "1",
    )
    assert ready["count"] == 16
    topo = ready["stages"][3]["detail"]["nodes"]
    assert set(topo.values()) == {"8 GPUs, NV18 all-to-all, 8 InfiniBand ports up"}
    slurm = api.client.get("/api/v1/instances/pair/slurm", headers=headers)
    assert slurm.status_code == 200, slurm.text
    conf = slurm.json()["files"]["slurm.conf"].splitlines()
    assert any(line.startswith("NodeName=pair-worker1 ") for line in conf)
    assert "SlurmctldHost=pair(" + head["address"] + ")" in conf
    assert all("Gres=gpu:h100:8" in line for line in conf if line.startswith("NodeName="))
    assert slurm.json()["files"]["topology.conf"].startswith("SwitchName=bj1-h100-leaf")
    # billed from `ready` on: nothing was charged for boot and gate time
    assert Decimal(ready["cost_so_far"]) == 0
    api.settle(60)
    minute = (Decimal("16") * Decimal("1.90") / 60).quantize(Decimal("0.000001"))
    assert Decimal(_show(api, headers, "pair")["cost_so_far"]) == minute


def test_a_node_failing_the_gate_is_drained_and_replaced(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "100")
    _launch(api, headers, 8, "solo")
    api.settle()
    first = _show(api, headers, "solo")["nodes"]
    backend = api.platform.backend
    assert isinstance(backend, SimBackend)
    backend.fault(first[0], "nccl")
    api.settle(30)
    again = _show(api, headers, "solo")
    reasons = [e["reason"] or "" for e in again["events"]]
    assert any(
        r.startswith(f"replacing failed node(s): {first[0]}: large-message busbw") for r in reasons
    )
    with transaction(api.platform.sessions) as s:
        node = s.get(NodeRow, first[0])
        assert node is not None and not node.schedulable
        assert node.drained_reason is not None and "below the 235 GB/s" in node.drained_reason
    api.settle()  # placed again, elsewhere
    api.settle(30)
    done = _show(api, headers, "solo")
    assert done["status"] == "running" and done["nodes"] != first
    assert [s["outcome"] for s in done["stages"]][-1] == "ok"
    statuses = [e["to_status"] for e in done["events"]]
    assert statuses == ["pending", "provisioning", "pending", "provisioning", "running"]
    assert backend.machines() == [f"ch-{done['id']}-2"]  # the failed placement was removed

    # the operator sees the drain and, once the node is repaired, resumes it (admin only)
    admin = _admin(api)
    listed = {n["id"]: n for n in api.client.get("/api/v1/admin/nodes", headers=admin).json()}
    assert "below the 235 GB/s" in listed[first[0]]["drained_reason"]
    resume = f"/api/v1/admin/nodes/{first[0]}/resume"
    assert api.client.post(resume, headers=headers).status_code == 403
    backend.fault(first[0], None)
    r = api.client.post(resume, headers=admin)
    assert r.status_code == 200 and r.json()["schedulable"] and r.json()["drained_reason"] is None
    assert api.client.post(resume, headers=admin).status_code == 409  # not drained any more
    assert api.client.post("/api/v1/admin/nodes/nope/resume", headers=admin).status_code == 404
    api.platform.reconcile()  # the inventory sync keeps it schedulable
    with transaction(api.platform.sessions) as s:
        node = s.get(NodeRow, first[0])
        assert node is not None and node.schedulable


def _admin(api: Api) -> dict[str, str]:
    email, password = api.platform.bootstrap_admin()
    r = api.client.post("/api/v1/auth/login", json={"email": email, "password": password})
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['api_key']}"}


def test_a_fabric_failure_fails_the_cluster(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "200")
    _launch(api, headers, 16, "slowfabric")
    api.settle()
    nodes = _show(api, headers, "slowfabric")["nodes"]
    backend = api.platform.backend
    assert isinstance(backend, SimBackend)
    backend.fabric_health = 0.5  # every node passes on its own; across them it is slow
    api.settle(30)
    failed = _show(api, headers, "slowfabric")
    assert failed["status"] == "failed", failed["status_reason"]
    assert failed["status_reason"].startswith("all-reduce across nodes: large-message busbw")
    with transaction(api.platform.sessions) as s:
        assert all(s.get(NodeRow, n).schedulable for n in nodes)  # type: ignore[union-attr]


def test_a_request_ready_after_15_minutes_gets_its_wait_back_once(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "100")
    launched = _launch(api, headers, 8, "late")
    api.clock.advance(16 * 60)  # no scheduling pass for 16 minutes (as if the fleet were full)
    api.settle()
    api.settle(30)
    ready = _show(api, headers, "late")
    assert ready["status"] == "running"
    waited = 16 * 60 + 30
    expected = (Decimal(waited * 8) * Decimal("1.90") / 3600).quantize(Decimal("0.000001"))
    sla = [e["reason"] for e in ready["events"] if (e["reason"] or "").startswith("SLA:")]
    assert sla == [  # the warning came at the first pass past the mark
        "SLA: not ready 15 min after the request; the whole wait is credited when it is ready "
        "(or if you give it up)",
        "SLA: ready 16 min 30 s after the request (more than 15 min): 4.18 CNY credited",
    ]
    balance = api.client.get("/api/v1/balance", headers=headers).json()
    credits = {c["kind"]: Decimal(c["balance"]) for c in balance["credits"]}
    assert credits["sla_credit"] == expected
    month = api.clock.now().strftime("%Y-%m")
    st = api.client.get(f"/api/v1/statements/{month}", headers=headers).json()
    assert Decimal(st["movements"]["credits_granted"]["sla_credit"]) == expected

    api.settle(60)  # later passes, a stop and a prompt start: nothing more
    assert api.client.post(f"/api/v1/instances/{launched['id']}/stop", headers=headers).is_success
    api.settle()
    assert api.client.post(f"/api/v1/instances/{launched['id']}/start", headers=headers).is_success
    api.settle()
    api.settle(30)
    again = _show(api, headers, "late")
    assert again["status"] == "running"
    assert sum((e["reason"] or "").startswith("SLA:") for e in again["events"]) == 2
    with transaction(api.platform.sessions) as s:
        assert ledger.verify(s).balanced


def test_a_request_ready_within_15_minutes_gets_nothing(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "100")
    _launch(api, headers, 1, "prompt")
    api.clock.advance(14 * 60)
    api.settle()
    api.settle(30)  # ready after 14 min 30 s
    ready = _show(api, headers, "prompt")
    assert ready["status"] == "running"
    assert not any((e["reason"] or "").startswith("SLA:") for e in ready["events"])


def test_three_failed_placements_fail_the_request(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "100")
    backend = api.platform.backend
    assert isinstance(backend, SimBackend)
    for spec in api.platform.catalog.nodes:
        if spec.gpu_model == "H100":
            backend.fault(spec.id, "nvlink")
    _launch(api, headers, 8, "unlucky")
    for _ in range(3):
        api.settle()
        api.settle(30)
    done = _show(api, headers, "unlucky")
    assert done["status"] == "failed"
    assert done["status_reason"].startswith("readiness gate failed (")
    assert "NVLink split into 2 domains" in done["status_reason"]
    statuses = [e["to_status"] for e in done["events"]]
    assert statuses.count("provisioning") == 3 and backend.machines() == []
    assert Decimal(done["cost_so_far"]) == 0 and Decimal(done["held"]) == 0


def _leaf(api: Api, node: str) -> str | None:
    with transaction(api.platform.sessions) as s:
        row = s.get(NodeRow, node)
        assert row is not None
        return row.ib_leaf


def test_a_cluster_node_failing_the_gate_is_swapped_and_the_rest_stays(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "200")
    launched = _launch(api, headers, 8, "swap", nodes=2)
    api.settle()
    head, worker = _show(api, headers, "swap")["nodes"]
    backend = api.platform.backend
    assert isinstance(backend, SimBackend)
    backend.fault(worker, "nccl")
    api.settle(30)  # booted; the gate fails on the worker, which is swapped
    swapped = _show(api, headers, "swap")
    assert swapped["status"] == "provisioning"
    assert head in swapped["nodes"] and worker not in swapped["nodes"]
    (new,) = set(swapped["nodes"]) - {head}
    assert _leaf(api, new) == _leaf(api, worker)  # the same topology block
    assert [(s["name"], s["outcome"]) for s in swapped["stages"]] == [
        ("allocated", "ok"),
        ("booting", None),
    ]
    assert swapped["stages"][0]["detail"]["replaced"] == {worker: new}
    api.settle(30)
    ready = _show(api, headers, "swap")
    assert ready["status"] == "running" and set(ready["nodes"]) == {head, new}
    assert set(ready["gate"]["nccl_busbw_gbps"]) == {head, new}  # the whole gate ran again
    events = [(e["to_status"], e["reason"] or "") for e in ready["events"]]
    assert [status for status, _ in events] == [
        "pending",
        "provisioning",
        "provisioning",
        "running",
    ]
    assert events[2][1].startswith(f"replacing failed node(s): {worker}: large-message busbw")
    assert events[2][1].endswith(f"; {worker} → {new}")  # an event, no change of state
    assert backend.machines() == [f"ch-{launched['id']}-1"]  # one workload throughout
    with transaction(api.platform.sessions) as s:
        drained = s.get(NodeRow, worker)
        assert drained is not None and "readiness gate of swap" in (drained.drained_reason or "")


def test_a_node_lost_under_a_running_cluster_is_replaced_and_unbilled_meanwhile(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "200")
    launched = _launch(api, headers, 8, "lost", nodes=2)
    api.settle()
    api.settle(30)
    running = _show(api, headers, "lost")
    assert running["status"] == "running"
    head, worker = running["nodes"]
    backend = api.platform.backend
    assert isinstance(backend, SimBackend)
    api.settle(60)
    minute = (Decimal("16") * Decimal("1.90") / 60).quantize(Decimal("0.000001"))
    assert Decimal(_show(api, headers, "lost")["cost_so_far"]) == minute

    backend.fault(worker, "down")
    api.settle()
    repairing = _show(api, headers, "lost")
    assert repairing["status"] == "provisioning"
    assert repairing["status_reason"].startswith(f"node(s) lost: {worker}: node down")
    (new,) = set(repairing["nodes"]) - {head}
    assert new != worker and _leaf(api, new) == _leaf(api, worker)
    api.settle(20)  # still booting the new node: not billed
    assert _show(api, headers, "lost")["status"] == "provisioning"
    assert Decimal(_show(api, headers, "lost")["cost_so_far"]) == minute
    api.settle(10)
    ready = _show(api, headers, "lost")
    assert ready["status"] == "running"
    assert all(s["outcome"] in ("ok", "skipped") for s in ready["stages"])
    assert ready["stages"][0]["detail"]["replaced"] == {worker: new}
    hosts = {n["hostname"]: n["node"] for n in ready["cluster"]["nodes"]}
    assert hosts == {"lost": head, "lost-worker1": new}
    statuses = [e["to_status"] for e in ready["events"]]
    assert statuses == ["pending", "provisioning", "running", "provisioning", "running"]
    assert backend.machines() == [f"ch-{launched['id']}-1"]
    api.settle(60)  # billed again from `ready`
    two = (Decimal("16") * Decimal("1.90") / 30).quantize(Decimal("0.000001"))
    assert Decimal(_show(api, headers, "lost")["cost_so_far"]) == two
    with transaction(api.platform.sessions) as s:
        drained = s.get(NodeRow, worker)
        assert drained is not None and not drained.schedulable
        assert drained.drained_reason == "lost under lost: node down (simulated fault)"
        assert ledger.verify(s).balanced


def test_a_lost_node_with_no_free_replacement_places_the_instance_again(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "300")
    _launch(api, headers, 8, "whole-site", nodes=16)  # every H100 node of bj1
    api.settle()
    api.settle(30)
    running = _show(api, headers, "whole-site")
    assert running["status"] == "running"
    backend = api.platform.backend
    assert isinstance(backend, SimBackend)
    backend.fault(running["nodes"][3], "down")
    api.settle()
    again = _show(api, headers, "whole-site")
    assert again["status"] == "pending" and again["nodes"] == []
    assert "placing again" in next(
        e["reason"] for e in reversed(again["events"]) if e["to_status"] == "pending"
    )
    assert backend.machines() == []  # the old workload is gone
    assert Decimal(again["held"]) > 0  # the hold stays while it waits


def test_a_request_given_up_after_15_minutes_is_warned_then_gets_its_wait_back(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "100")
    launched = _launch(api, headers, 8, "stuck")
    watch = next(r for r in api.platform.reconcilers if r.name == "sla")
    api.clock.advance(14 * 60)  # no scheduling pass meanwhile (as if the fleet were full)
    watch.step()
    assert not any(
        (e["reason"] or "").startswith("SLA:") for e in _show(api, headers, "stuck")["events"]
    )
    api.clock.advance(60)
    watch.step()
    watch.step()  # once per request
    api.clock.advance(10)
    stop = api.client.post(f"/api/v1/instances/{launched['id']}/stop", headers=headers)
    assert stop.status_code == 200, stop.text
    shown = _show(api, headers, "stuck")
    assert shown["status"] == "stopped"
    sla = [e["reason"] for e in shown["events"] if (e["reason"] or "").startswith("SLA:")]
    assert sla == [
        "SLA: not ready 15 min after the request; the whole wait is credited when it is ready "
        "(or if you give it up)",
        "SLA: given up 15 min 10 s after the request (more than 15 min): 3.80 CNY credited "
        "(the window's worth, 15 min)",
    ]
    # given up by its owner: the window's worth, 900 s × 8 × 1.90 / 3600, not the 910 s waited
    balance = api.client.get("/api/v1/balance", headers=headers).json()
    credits = {c["kind"]: c["balance"] for c in balance["credits"]}
    assert credits["sla_credit"] == "3.80"

    # a new request, ready at once: nothing more; nor for a request given up early
    assert api.client.post(f"/api/v1/instances/{launched['id']}/start", headers=headers).is_success
    api.settle()
    api.settle(30)
    assert _show(api, headers, "stuck")["status"] == "running"
    early = _launch(api, headers, 1, "early")
    api.clock.advance(60)
    assert api.client.delete(f"/api/v1/instances/{early['id']}", headers=headers).is_success
    for ident, said in ((launched["id"], 2), (early["id"], 0)):
        events = _show(api, headers, ident)["events"]
        assert sum((e["reason"] or "").startswith("SLA:") for e in events) == said
    with transaction(api.platform.sessions) as s:
        assert ledger.verify(s).balanced


def test_without_the_gate_a_run_then_stop_is_no_sla_give_up(api: Api) -> None:
    api.platform.provisioner.gated = False  # a backend that cannot probe: running is ready
    headers = api.signup()
    api.top_up(headers, "100")
    launched = _launch(api, headers, 8, "plain")
    api.settle()
    api.settle(30)
    assert _show(api, headers, "plain")["status"] == "running"
    api.settle(3600)
    assert api.client.post(f"/api/v1/instances/{launched['id']}/stop", headers=headers).is_success
    api.settle()
    events = _show(api, headers, "plain")["events"]
    assert not any((e["reason"] or "").startswith("SLA:") for e in events)
    balance = api.client.get("/api/v1/balance", headers=headers).json()
    assert "sla_credit" not in {c["kind"] for c in balance["credits"]}


def test_a_lost_head_is_replaced_in_its_rank(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "200")
    _launch(api, headers, 8, "ranks", nodes=2)
    api.settle()
    api.settle(30)
    before = {n["hostname"]: n["node"] for n in _show(api, headers, "ranks")["cluster"]["nodes"]}
    backend = api.platform.backend
    assert isinstance(backend, SimBackend)
    backend.fault(before["ranks"], "down")  # the head
    api.settle()
    api.settle(30)
    after = _show(api, headers, "ranks")
    assert after["status"] == "running"
    now = {n["hostname"]: n["node"] for n in after["cluster"]["nodes"]}
    # the worker keeps its rank and hostname, whatever the new node's id sorts as
    assert now["ranks-worker1"] == before["ranks-worker1"]
    assert now["ranks"] not in before.values()


def test_a_monthly_plan_keeps_its_price_when_placed_again_and_is_refunded_if_lost(
    api: Api,
) -> None:
    headers = api.signup()
    api.top_up(headers, "20000")
    body = {"gpu": "H100", "count": 8, "name": "prepaid", "plan": "monthly"}
    assert api.client.post("/api/v1/instances", headers=headers, json=body).status_code == 201
    api.settle()
    api.settle(30)
    running = _show(api, headers, "prepaid")
    assert running["status"] == "running"
    price = running["price_per_card_hour"]
    assert Decimal(price) == Decimal("1.235")  # 35% under the 1.90 on-demand price
    backend = api.platform.backend
    assert isinstance(backend, SimBackend)
    backend.fault(running["nodes"][0], "down")  # one node: placed again from scratch
    api.settle()
    api.settle(30)
    again = _show(api, headers, "prepaid")
    assert again["status"] == "running" and again["nodes"] != running["nodes"]
    assert again["price_per_card_hour"] == price  # the prepaid price, not the on-demand one
    cash = Decimal(api.client.get("/api/v1/balance", headers=headers).json()["cash"])

    backend.fault(again["nodes"][0], "down")
    api.settle()  # placed again ...
    for spec in api.platform.catalog.nodes:
        backend.fault(spec.id, "down")  # ... where nothing can be reached any more
    api.settle(1000)  # not ready within provision_timeout_seconds (900): failed
    lost = _show(api, headers, "prepaid")
    assert lost["status"] == "failed", lost["status_reason"]
    refunded = Decimal(api.client.get("/api/v1/balance", headers=headers).json()["cash"]) - cash
    paid = Decimal("1.235") * 8 * 720  # 30 days of 8 GPUs at the plan's price: 7,113.60
    assert paid - Decimal("5") < refunded < paid  # all but the ~20 minutes it was held
    with transaction(api.platform.sessions) as s:
        assert ledger.verify(s).balanced


def test_a_node_lost_during_the_gate_is_replaced(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "200")
    _launch(api, headers, 8, "midgate", nodes=2)
    api.settle()
    head, worker = _show(api, headers, "midgate")["nodes"]
    backend = api.platform.backend
    assert isinstance(backend, SimBackend)
    backend.fault(worker, "down")  # unreachable before the gate could read it
    api.settle(30)
    swapped = _show(api, headers, "midgate")
    assert swapped["status"] == "provisioning" and worker not in swapped["nodes"]
    (new,) = set(swapped["nodes"]) - {head}
    assert swapped["stages"][0]["detail"]["replaced"] == {worker: new}
    api.settle(30)
    assert _show(api, headers, "midgate")["status"] == "running"
