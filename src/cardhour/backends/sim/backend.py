"""The simulated backend.

It holds machines in memory (and, when given a state file, on disk so a restart keeps them).
A launch becomes running `provision_seconds` after it was first seen, measured on the injected
clock. It fails a launch when told to (`fail_next`, `fail_names`) or with probability `fail_rate`
(seeded, so runs repeat). It never pretends to be real: connection details carry
`"simulated": true` and a `.invalid` host name.
"""

from __future__ import annotations

import json
import random
import threading
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path

from cardhour.backends.base import Backend, LaunchSpec, MachineState, PollResult
from cardhour.core.catalog import Catalog
from cardhour.core.clock import Clock
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


class SimBackend(Backend):
    name = "sim"

    def __init__(
        self,
        catalog: Catalog,
        clock: Clock,
        provision_seconds: float = 3.0,
        fail_rate: float = 0.0,
        state_file: Path | None = None,
        seed: int = 0,
    ) -> None:
        self._catalog = catalog
        self._clock = clock
        self.provision_seconds = provision_seconds
        self.fail_rate = fail_rate
        self.fail_names: set[str] = set()
        self._fail_next = 0
        self._random = random.Random(seed)
        self._state_file = state_file
        self._lock = threading.Lock()
        self._machines: dict[str, SimMachine] = self._load()
        self.calls: list[tuple[str, str]] = []  # (verb, name): lets tests check idempotence

    def fail_next(self, count: int = 1) -> None:
        """The next `count` launches fail."""
        with self._lock:
            self._fail_next += count

    def sync_inventory(self) -> list[NodeSpec]:
        return list(self._catalog.nodes)

    def launch(self, spec: LaunchSpec) -> None:
        with self._lock:
            self.calls.append(("launch", spec.external_name))
            if spec.external_name in self._machines:
                return
            failed = spec.external_name in self.fail_names or self._random.random() < self.fail_rate
            if self._fail_next:
                self._fail_next -= 1
                failed = True
            ready = self._clock.now() + timedelta(seconds=self.provision_seconds)
            self._machines[spec.external_name] = SimMachine(
                spec.external_name,
                sorted(spec.gpus_by_node),
                spec.gpu_model,
                spec.gpu_count,
                spec.image,
                ready.isoformat(),
                failed,
                spec.ssh_key is not None,
            )
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
            if self._machines.pop(external_name, None) is not None:
                self._save()

    def machines(self) -> list[str]:
        with self._lock:
            return sorted(self._machines)

    @staticmethod
    def _connection(machine: SimMachine) -> dict[str, object]:
        head = machine.nodes[0]
        host = f"{head}.sim.cardhour.invalid"
        return {
            "simulated": True,
            "note": "simulated backend: no real machine exists behind this address",
            "host": host,
            "port": 22,
            "user": "root",
            "ssh": f"ssh -p 22 root@{host}",
            "nodes": machine.nodes,
            "image": machine.image,
            "ssh_key_injected": machine.has_ssh_key,
        }

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
