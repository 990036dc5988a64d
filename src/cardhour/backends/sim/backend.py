"""The simulated backend.

It holds machines in memory (and, when given a state file, on disk so a restart keeps them).
A launch becomes running `provision_seconds` after it was first seen, measured on the injected
clock, plus the weights' estimated copy time when it mounts model weights its data centre does
not cache (no bytes move: the copy is simulated, and the connection says what was mounted).
It fails a launch when told to (`fail_next`, `fail_names`) or with probability `fail_rate`
(seeded, so runs repeat). It never pretends to be real: connection details carry
`"simulated": true` and a `.invalid` host name.
"""

from __future__ import annotations

import json
import random
import threading
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from cardhour.backends.base import (
    Backend,
    BackendError,
    LaunchSpec,
    MachineState,
    PollResult,
    Probing,
)
from cardhour.backends.sim import sshd
from cardhour.core.catalog import Catalog
from cardhour.core.clock import Clock
from cardhour.core.readiness import modelled as reports
from cardhour.core.topology import NodeSpec


@dataclass
class SimMachine:
    external_name: str
    nodes: list[str]
    gpu_model: str
    gpu_count: int
    image: str
    ready_at: str  # ISO timestamp
    failed: bool
    has_ssh_key: bool
    authorized_keys: str = ""
    ports: dict[str, int] = field(default_factory=dict)  # node -> its real sshd's port
    weights: dict[str, object] | None = None  # the spec's WeightsMount, as a dict
    attempt: int = 0  # the placement the nodes are for
    volumes: list[dict[str, object]] = field(default_factory=list)  # the spec's, as dicts


class SimBackend(Backend, Probing):
    name = "sim"

    def __init__(
        self,
        catalog: Catalog,
        clock: Clock,
        provision_seconds: float = 3.0,
        fail_rate: float = 0.0,
        state_file: Path | None = None,
        seed: int = 0,
        sshd_dir: Path | None = None,
    ) -> None:
        """`sshd_dir`: back every node with a real sshd (`sshd.py`), its files under there."""
        self._catalog = catalog
        self._clock = clock
        self.provision_seconds = provision_seconds
        self.fail_rate = fail_rate
        self.fail_names: set[str] = set()
        self._fail_next = 0
        self._random = random.Random(seed)
        self._state_file = state_file
        self.sshd_dir = sshd_dir
        self._lock = threading.Lock()
        self._machines: dict[str, SimMachine] = self._load()
        self.calls: list[tuple[str, str]] = []  # (verb, name): lets tests check idempotence
        self.faults: dict[str, str] = {}  # node id -> "nccl" | "nvlink" | "ib"
        # share of the modelled busbw an all-reduce across nodes reaches (below 1: a congested
        # or misconfigured fabric that no single node is to blame for)
        self.fabric_health = 1.0

    def fail_next(self, count: int = 1) -> None:
        """The next `count` launches fail."""
        with self._lock:
            self._fail_next += count

    def sync_inventory(self) -> list[NodeSpec]:
        return list(self._catalog.nodes)

    def launch(self, spec: LaunchSpec) -> None:
        with self._lock:
            self.calls.append(("launch", spec.external_name))
            known = self._machines.get(spec.external_name)
            if known is not None:
                # a launch from a stale claim (an older placement) must not undo a swap
                if spec.attempt >= known.attempt and sorted(spec.gpus_by_node) != known.nodes:
                    self._swap_nodes(known, sorted(spec.gpus_by_node), spec.attempt)
                return
            failed = spec.external_name in self.fail_names or self._random.random() < self.fail_rate
            if self._fail_next:
                self._fail_next -= 1
                failed = True
            copy = spec.weights.copy_seconds if spec.weights is not None else 0
            ready = self._clock.now() + timedelta(seconds=self.provision_seconds + copy)
            self._machines[spec.external_name] = SimMachine(
                spec.external_name,
                sorted(spec.gpus_by_node),
                spec.gpu_model,
                spec.gpu_count,
                spec.image,
                ready.isoformat(),
                failed,
                spec.ssh_key is not None,
                spec.ssh_key or "",
                weights=asdict(spec.weights) if spec.weights is not None else None,
                attempt=spec.attempt,
                volumes=[v.spec() for v in spec.volumes],
            )
            machine = self._machines[spec.external_name]
            if self.sshd_dir is not None and not failed:
                for node in machine.nodes:
                    folder = self.sshd_dir / spec.external_name / node
                    machine.ports[node] = sshd.start(folder, spec.ssh_key or "")
            self._save()

    def _swap_nodes(self, machine: SimMachine, nodes: list[str], attempt: int) -> None:
        """The platform replaced nodes: the new ones boot (`provision_seconds` from now, plus
        the weights' copy; the workload reads as provisioning until then), the old ones are
        let go. Holds the lock."""
        added = [n for n in nodes if n not in machine.nodes]
        removed = [n for n in machine.nodes if n not in nodes]
        machine.nodes, machine.attempt = nodes, attempt
        copy = int(str(machine.weights["copy_seconds"])) if machine.weights else 0
        ready = self._clock.now() + timedelta(seconds=self.provision_seconds + copy)
        machine.ready_at = ready.isoformat()
        if self.sshd_dir is not None:
            for node in removed:
                if machine.ports.pop(node, None) is not None:
                    sshd.stop(self.sshd_dir / machine.external_name / node)
            for node in added:
                folder = self.sshd_dir / machine.external_name / node
                machine.ports[node] = sshd.start(folder, machine.authorized_keys)
        self._save()

    def poll(self, external_name: str) -> PollResult:
        with self._lock:
            machine = self._machines.get(external_name)
        if machine is None:
            return PollResult(MachineState.GONE)
        if machine.failed:
            return PollResult(MachineState.FAILED, message="simulated provisioning failure")
        if self._clock.now() < datetime.fromisoformat(machine.ready_at):
            return PollResult(MachineState.PROVISIONING)
        return PollResult(MachineState.RUNNING, self._connection(machine))

    def terminate(self, external_name: str) -> None:
        with self._lock:
            self.calls.append(("terminate", external_name))
            machine = self._machines.pop(external_name, None)
            if machine is not None:
                self._save()
        if machine is not None and self.sshd_dir is not None:
            for node in machine.ports:
                sshd.stop(self.sshd_dir / external_name / node)

    FAULTS = ("nccl", "nvlink", "ib", "down")

    def fault(self, node: str, kind: str | None) -> None:
        """From now on `node` fails the readiness check `kind`, or is `down` (lost: unreachable,
        reported by `lost_nodes`); None heals it."""
        if kind is not None and kind not in self.FAULTS:
            raise ValueError(f"unknown fault {kind!r}; one of {self.FAULTS}")
        with self._lock:
            if kind is None:
                self.faults.pop(node, None)
            else:
                self.faults[node] = kind

    def _running(self, external_name: str, node: str | None = None) -> SimMachine:
        with self._lock:
            machine = self._machines.get(external_name)
        if machine is None or machine.failed:
            raise BackendError(f"{external_name} is not running")
        if node is not None and node not in machine.nodes:
            raise BackendError(f"{external_name} has no node {node}")
        down = [n for n in ([node] if node is not None else machine.nodes) if self._down(n)]
        if down:
            raise BackendError(f"{', '.join(down)} unreachable (simulated fault)")
        return machine

    def _down(self, node: str) -> bool:
        return self.faults.get(node) == "down"

    def lost_nodes(self, external_name: str) -> dict[str, str]:
        with self._lock:
            machine = self._machines.get(external_name)
        if machine is None or machine.failed:
            return {}
        return {n: "node down (simulated fault)" for n in machine.nodes if self._down(n)}

    def authorized_keys(self, external_name: str, node: str) -> str:
        machine = self._running(external_name, node)
        if node in machine.ports and self.sshd_dir is not None:  # what the real sshd reads
            return sshd.authorized_keys(self.sshd_dir / external_name / node)
        return machine.authorized_keys

    def topology(self, external_name: str, node: str) -> tuple[str, str | None]:
        machine = self._running(external_name, node)
        spec = self._catalog.node(node)
        model = self._catalog.model_by_id(machine.gpu_model)
        fault = self.faults.get(node)
        topo = reports.nvidia_smi_topo(spec, model, split_nvlink=fault == "nvlink")
        if spec.ib_leaf is None or spec.ib_rails == 0:
            return topo, None
        return topo, reports.ibstat(spec, down_rails=[0] if fault == "ib" else [])

    def all_reduce(self, external_name: str, nodes: list[str], gpus_per_node: int) -> str:
        machine = self._running(external_name)
        model = self._catalog.model_by_id(machine.gpu_model)
        specs = [self._catalog.node(n) for n in nodes]
        degraded = any(self.faults.get(n) in ("nccl", "nvlink") for n in nodes)
        busbw = reports.node_busbw(model, degraded)
        if len(nodes) > 1:
            fabric = reports.fabric_busbw(specs)
            if any(self.faults.get(n) == "ib" for n in nodes):
                fabric *= (specs[0].ib_rails - 1) / max(specs[0].ib_rails, 1) * 0.5
            busbw = min(busbw, fabric * self.fabric_health)
        return reports.all_reduce_perf(nodes, gpus_per_node, f"NVIDIA {model.name}", busbw)

    def machines(self) -> list[str]:
        with self._lock:
            return sorted(self._machines)

    @staticmethod
    def _connection(machine: SimMachine) -> dict[str, object]:
        head = machine.nodes[0]
        if machine.ports:  # real sshds on loopback ports: ssh works, the GPUs are simulated
            port = machine.ports[head]
            return {
                "simulated": True,
                "note": "simulated GPUs; each node is a real sshd on a loopback port",
                "host": "127.0.0.1",
                "port": port,
                "user": "root",
                "ssh": f"ssh -p {port} root@127.0.0.1",
                "nodes": machine.nodes,
                "hosts": {n: "127.0.0.1" for n in machine.nodes},
                "ports": dict(machine.ports),
                "image": machine.image,
                "ssh_key_injected": machine.has_ssh_key,
            } | SimBackend._mounted(machine)
        host = f"{head}.sim.cardhour.invalid"
        return {
            "simulated": True,
            "note": "simulated backend: no real machine exists behind this address",
            "host": host,
            "port": 22,
            "user": "root",
            "ssh": f"ssh -p 22 root@{host}",
            "nodes": machine.nodes,
            "hosts": {n: f"{n}.sim.cardhour.invalid" for n in machine.nodes},
            "image": machine.image,
            "ssh_key_injected": machine.has_ssh_key,
        } | SimBackend._mounted(machine)

    @staticmethod
    def _mounted(machine: SimMachine) -> dict[str, object]:
        found: dict[str, object] = {}
        if machine.weights is not None:
            w = machine.weights
            copied = bool(w["copy_seconds"])
            found["weights"] = {"id": w["id"], "mount": w["mount"], "copied_in": copied}
        if machine.volumes:  # the records are real; no data is stored anywhere
            found["volumes"] = {
                "simulated": True,
                "mounted": {str(v["path"]): str(v["id"]) for v in machine.volumes},
                "note": "simulated backend: volumes are records only, nothing is stored",
            }
        return found

    def _load(self) -> dict[str, SimMachine]:
        if self._state_file is None or not self._state_file.exists():
            return {}
        raw = json.loads(self._state_file.read_text())
        return {name: SimMachine(**m) for name, m in raw.items()}

    def _save(self) -> None:
        if self._state_file is None:
            return
        tmp = self._state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({n: asdict(m) for n, m in self._machines.items()}, indent=1))
        tmp.replace(self._state_file)
