"""The readiness gate, run by the provisioning reconciler once the backend reports a workload up
(`core.readiness` has the stages and thresholds). Backend calls happen with no transaction open;
each stage is recorded as it ends (`services.readiness.record`, fenced by the lease).

Outcomes: every check passes → `ready`, and the instance turns `running` (billable from here);
nodes that fail the topology or their own nccl check → drained and replaced
(`services.readiness.replace_nodes`: swapped for nearby free nodes on a multi-node instance, the
gate then runs again; else the instance is placed again and the workload removed); keys
missing, or an all-reduce across nodes that fails while each node passes → the instance fails
(no node is to blame, so none is drained); an image that cannot run `all_reduce_perf` → the
NCCL check is `skipped` with the reason (`backends.base.ProbeUnavailable`), nothing drained.
Each recorded stage extends the lease, so a slow gate is not taken over mid-run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from cardhour.backends.base import Backend, BackendError, ProbeUnavailable, Probing
from cardhour.core import readiness, sshkeys
from cardhour.core.catalog import Catalog
from cardhour.core.clock import Clock
from cardhour.core.errors import InvalidInput
from cardhour.core.parsers import hwtopo, nccl_tests
from cardhour.core.topology import NodeSpec
from cardhour.db.engine import transaction
from cardhour.services.compute import fleet, provisioning
from cardhour.services.compute import readiness as stages
from cardhour.services.compute.provisioning import Claim

log = logging.getLogger("cardhour.reconcilers.gate")
Failed = dict[str, str]  # node id -> why
#: a check's (outcome, detail, nodes that failed it, why the instance fails as a whole)
Result = tuple[str, dict[str, Any], Failed, str | None]


class Gate:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        clock: Clock,
        backend: Backend,
        catalog: Catalog,
        connection: dict[str, Any],
        lease_seconds: int,
    ) -> None:
        assert isinstance(backend, Probing)
        self.sessions, self.clock, self.catalog = sessions, clock, catalog
        self.backend: Probing = backend
        self.connection = connection
        self.lease = timedelta(seconds=lease_seconds)
        self.specs: dict[str, NodeSpec] = {}  # the claimed nodes as the inventory has them

    def run(self, claim: Claim, terminate: Callable[[], None]) -> bool:
        """Run every check on the claimed workload. Returns whether the row changed;
        `terminate` removes the workload (called once a replacement or a failure is
        committed, and only while the lease was still ours)."""
        assert claim.external_name is not None
        nodes = sorted(claim.gpus_by_node)
        with transaction(self.sessions) as session:
            self.specs = fleet.specs_of(session, nodes)
        if not self._record(claim, "booting", "ok", self._booted(claim, nodes)):
            return False
        for name, check in (
            ("keys_injected", self._keys),
            ("topology_detected", self._topology),
            ("nccl_gate", self._nccl),
        ):
            started = self.clock.now()
            try:
                outcome, detail, failed, fatal = check(claim, nodes)
            except BackendError as exc:  # a node that cannot be reached: lost, or a hiccup
                lost = self._lost(claim, exc)
                outcome, detail, failed, fatal = "failed", {"problems": lost}, lost, None
            if not self._record(claim, name, outcome, detail, started):
                return False
            if failed or fatal:
                try:
                    with transaction(self.sessions) as session:
                        now = self.clock.now()
                        if fatal:
                            ok = provisioning.apply_failed(session, claim, fatal, now)
                            replaced = stages.FAILED if ok else None
                        else:
                            replaced = stages.replace_nodes(
                                session, self.catalog, claim, failed, now
                            )
                except stages.Raced as exc:  # rolled back: the gate runs again once the lease ends
                    log.info("replacing nodes of %s: %s", claim.external_name, exc)
                    return False
                # ours to remove unless its nodes were swapped (the workload lives on); a lost
                # lease leaves it to its new owner
                if replaced in (stages.FAILED, stages.PLACED_AGAIN):
                    terminate()
                return replaced is not None
        with transaction(self.sessions) as session:
            return stages.ready(session, claim, self.connection, self.clock.now())

    def _lost(self, claim: Claim, error: BackendError) -> Failed:
        """The claimed nodes the backend reports lost, to be replaced like nodes failing a
        check; none (a passing hiccup): `error` is raised again and the pass retries."""
        assert claim.external_name is not None
        lost = self.backend.lost_nodes(claim.external_name)
        mine = {node: why for node, why in lost.items() if node in claim.gpus_by_node}
        if not mine:
            raise error
        return mine

    def _booted(self, claim: Claim, nodes: list[str]) -> dict[str, Any]:
        """The `booting` stage's detail: the nodes, and the model weights mounted (with the
        copy, when they were not cached in the data centre, that booting waited for)."""
        detail: dict[str, Any] = {"nodes": nodes}
        if claim.weights is not None and claim.data_centre is not None:
            plan = self.catalog.weights_plan(claim.weights, claim.data_centre)
            detail["weights"] = plan.detail()
        return detail

    def _record(
        self,
        claim: Claim,
        name: str,
        outcome: str,
        detail: dict[str, Any] | None = None,
        started: datetime | None = None,
    ) -> bool:
        now = self.clock.now()
        with transaction(self.sessions) as session:
            return stages.record(
                session, claim, name, started or now, now, outcome, detail, now + self.lease
            )

    def _keys(self, claim: Claim, nodes: list[str]) -> Result:
        """Every key given (by fingerprint: a node may rewrite the lines) on every node. Keys
        missing are the backend's fault, not the node's: the instance fails, nothing drains."""
        assert claim.external_name is not None
        expected = _fingerprints(claim.ssh_key or "")
        missing: Failed = {}
        for node in nodes:
            held = _fingerprints(self.backend.authorized_keys(claim.external_name, node))
            lost = expected - held
            if lost:
                missing[node] = f"{len(lost)} of {len(expected)} SSH keys missing"
        detail: dict[str, Any] = {"keys": len(expected), "nodes": len(nodes)}
        if missing:
            detail["missing"] = missing
            said = "; ".join(f"{n}: {why}" for n, why in sorted(missing.items()))
            return "failed", detail, {}, f"SSH keys not injected ({said})"
        return ("ok" if expected else "skipped"), detail, {}, None

    def _topology(self, claim: Claim, nodes: list[str]) -> Result:
        assert claim.external_name is not None
        model = self.catalog.model_by_id(claim.gpu_model)
        found: dict[str, str] = {}
        bad: Failed = {}
        for node in nodes:
            topo_text, ib_text = self.backend.topology(claim.external_name, node)
            try:
                topo = hwtopo.parse_topo(topo_text)
                ib = hwtopo.parse_ibstat(ib_text) if ib_text is not None else None
            except InvalidInput as exc:
                bad[node] = f"unreadable topology report: {exc.message}"
                continue
            check = readiness.check_topology(
                self.specs[node], model, topo, ib, multi_node=len(nodes) > 1
            )
            found[node] = check.summary
            if not check.ok:
                bad[node] = "; ".join(check.problems)
        detail: dict[str, Any] = {"nodes": found}
        if bad:
            detail["problems"] = bad
        return ("failed" if bad else "ok"), detail, bad, None

    def _nccl(self, claim: Claim, nodes: list[str]) -> Result:
        """Each node's all-reduce against its threshold, then across nodes; `skipped` when the
        workload's image cannot run `all_reduce_perf` (a renter's own image: not measured,
        not the nodes' fault)."""
        try:
            return self._nccl_measured(claim, nodes)
        except ProbeUnavailable as exc:
            return "skipped", {"why": str(exc)}, {}, None

    def _nccl_measured(self, claim: Claim, nodes: list[str]) -> Result:
        assert claim.external_name is not None
        model = self.catalog.model_by_id(claim.gpu_model)
        per_node: dict[str, float] = {}
        thresholds: dict[str, float] = {}
        bad: Failed = {}
        for node in nodes:
            k = len(claim.gpus_by_node[node])
            if k < 2:
                continue
            threshold = readiness.node_threshold(model, k, self.specs[node].gpu_count)
            outcome = self._all_reduce(claim.external_name, [node], k, float(threshold))
            thresholds[node] = float(threshold)
            if outcome.large_busbw is not None:
                per_node[node] = round(outcome.large_busbw, 1)
            if not outcome.passed:
                bad[node] = outcome.reason
        detail: dict[str, Any] = {"nccl_busbw_gbps": per_node, "thresholds_gbps": thresholds}
        fatal = None
        if not bad and len(nodes) > 1:
            fabric = readiness.fabric_threshold([self.specs[n] for n in nodes])
            k = min(len(claim.gpus_by_node[n]) for n in nodes)
            outcome = self._all_reduce(
                claim.external_name, nodes, k, float(fabric) if fabric is not None else 0.0
            )
            if outcome.large_busbw is not None:
                detail["across_nodes_gbps"] = round(outcome.large_busbw, 1)
            detail["across_nodes_threshold_gbps"] = float(fabric) if fabric is not None else None
            if not outcome.passed:
                fatal = f"all-reduce across nodes: {outcome.reason}"
        if bad:
            detail["problems"] = bad
        if not per_node and "across_nodes_gbps" not in detail and not bad:
            return "skipped", detail | {"why": "one GPU: nothing to all-reduce"}, bad, None
        return ("failed" if bad or fatal else "ok"), detail, bad, fatal

    def _all_reduce(
        self, external_name: str, nodes: list[str], gpus_per_node: int, threshold: float
    ) -> nccl_tests.GateOutcome:
        text = self.backend.all_reduce(external_name, nodes, gpus_per_node)
        try:
            return nccl_tests.gate(nccl_tests.parse(text), threshold)
        except InvalidInput as exc:
            return nccl_tests.GateOutcome(False, None, None, threshold, exc.message)


def _fingerprints(text: str) -> set[str]:
    """The fingerprints of the keys in an `authorized_keys` text (lines that are no key, such
    as comments, are left out)."""
    found = set()
    for line in text.splitlines():
        try:
            found.add(sshkeys.parse(line).fingerprint)
        except InvalidInput:
            continue
    return found
