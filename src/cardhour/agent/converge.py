"""One convergence pass: the containers the control plane wants on this host against the ones
the runtime holds, then a report of each wanted one.

Containers are named `<workload>.<host>` and carry their host, workload and spec fingerprint
as labels, so a restarted agent adopts what it finds: a container whose fingerprint matches is
kept as it is; one with another fingerprint is replaced; one no longer wanted is removed (only
containers labelled with this host are ever touched). A spec that failed to start is not
retried until it changes (its failure is reported instead), so a bad image does not make a
loop.
"""

from __future__ import annotations

import logging
import math
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cardhour.agent import clusters, disk_copies, disks, nccl
from cardhour.agent import volumes as volume_tasks
from cardhour.agent.apps import AppReplicas, free_port
from cardhour.agent.disk_copies import DiskCopies
from cardhour.agent.volumes import Busy, Volumes
from cardhour.core.hosts import EXITED, FAILED, PENDING, RUNNING, STOPPED, clamped
from cardhour.core.storage.volumes import DELETE_TASK, EXPORT_TASK
from cardhour.runtime.base import (
    LABEL_HOST,
    LABEL_WORKLOAD,
    PRIVATE,
    ContainerRuntime,
    ContainerSpec,
    ContainerState,
    ContainerStatus,
    Mount,
    RuntimeFailure,
)

log = logging.getLogger("cardhour.agent")
LABEL_FINGERPRINT = "org.cardhour.fingerprint"
LABEL_SSH_PORT = "org.cardhour.ssh-port"  # on the host's network: where its sshd listens
LOG_LINES = 20
SSHD_GRACE_SECONDS = 2.0  # silent this long: ask whether the image has sshd at all
TIDY_SECONDS = 600.0  # leftovers of cut-short engine calls: at the first pass, then this often


@dataclass
class Converger:
    runtime: ContainerRuntime
    host: str
    address: str
    devices: dict[int, str]  # GPU index -> CDI device name
    weights_dir: Path
    real_gpus: bool
    failed: dict[str, tuple[str, str]] = field(default_factory=dict)  # workload -> (fp, why)
    probes: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)  # by start
    applied: dict[str, tuple[str, str]] = field(default_factory=dict)  # peers: (start, digest)
    #: a cluster head's all-reduce across nodes: (start, peers digest, probe)
    across: dict[str, tuple[str, str, dict[str, str]]] = field(default_factory=dict)
    #: workloads whose report waits on something this pass could not finish (ask again soon)
    unfinished: set[str] = field(default_factory=set)
    tidied_at: float = -math.inf  # when `runtime.tidy` last ran (monotonic)
    #: container -> (its start, when this agent first found its sshd silent; infinity once
    #: the image was found to have sshd: never asked again for that start)
    silent_since: dict[str, tuple[str, float]] = field(default_factory=dict)
    apps: AppReplicas | None = None  # marketplace replicas (None: this agent runs none)
    volumes: Volumes | None = None  # persistent volumes (None: this agent keeps none)
    disks: set[str] = field(default_factory=set)  # the disks the last pass's specs named
    copies: DiskCopies | None = None  # kept disks on the move (None: this agent moves none)

    def step(self, desired: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
        """Converge once; returns (the container reports, settled: nothing is still changing)."""
        tasks = [s for s in desired if s.get("kind") in (DELETE_TASK, EXPORT_TASK)]
        want = {str(s["workload"]): s for s in desired if s not in tasks}
        have = {
            c.labels.get(LABEL_WORKLOAD, c.name): c
            for c in self.runtime.list({LABEL_HOST: self.host})
        }
        if time.monotonic() - self.tidied_at >= TIDY_SECONDS:
            self.tidied_at = time.monotonic()  # a failure is tried again then, not every pass
            try:  # what a run or removal cut short left (the agent died in between)
                self.runtime.tidy({LABEL_HOST: self.host})
                disks.sweep(self.runtime, self.host, desired)
                if self.apps is not None:
                    self.apps.tidy({c.name for c in have.values()})
            except (RuntimeFailure, OSError) as exc:
                log.warning("cannot tidy this host's leftovers: %s", exc)
        named = {str(s["disk"]) for s in desired if s.get("disk")}
        if self.disks - named:  # a disk let go: removed now, not at the next tidy pass
            disks.sweep(self.runtime, self.host, desired)
        self.disks, self.unfinished = named, set()
        kept = [  # asked to stop keeping their disks: no container to start or report on
            disks.keep(self.runtime, n, self.box(n), want.pop(n), have.pop(n, None), self._remove)
            for n in [n for n, spec in want.items() if spec.get("stopped")]
        ]
        settled = all(r["state"] == STOPPED for r in kept)
        for name in sorted(set(have) - set(want)):
            log.info("removing %s: no longer wanted here", name)
            self._remove(have[name].name)
        for name, spec in want.items():
            current = have.get(name)
            if current is not None and current.labels.get(LABEL_FINGERPRINT) != spec["fingerprint"]:
                log.info("replacing %s: its spec changed", name)
                self._remove(current.name)
                current = None
            if current is None:
                have.pop(name, None)  # none, or the one just replaced
                if self.failed.get(name, ("",))[0] != spec["fingerprint"]:
                    started = self._start(name, spec)
                    if started is not None:
                        have[name] = started
                    settled = False
        for name in set(self.failed) - set(want):
            del self.failed[name]
        if self.volumes is not None:  # what no wanted container mounts any more
            self.volumes.release(volume_tasks.in_use(list(want.values())))
        reports = [*kept, *disk_copies.run_tasks(self.copies, self.volumes, tasks, desired)]
        settled &= all(r["state"] != RUNNING for r in reports)  # a disk being saved for a move
        for name, spec in want.items():
            try:
                report = self._report(name, spec, have.get(name))
            except RuntimeFailure as exc:  # this container only: the others still report
                log.warning("cannot look at %s: %s", name, exc)
                report = {"workload": name, "state": PENDING, "error": str(exc)}
            settled &= name not in self.unfinished and (
                report["state"] in (FAILED, EXITED)
                or (report["state"] == RUNNING and "probes" in report)
            )
            reports.append(clamped(report))
        return reports, settled

    def _remove(self, box: str) -> None:
        """Remove container `box` and forget what was known of it."""
        self.runtime.remove(box)
        for known in (self.probes, self.applied, self.across, self.silent_since):
            known.pop(box, None)
        if self.apps is not None:
            self.apps.forget(box)

    def box(self, workload: str) -> str:
        """The container's name: the workload's and this host's (several agents may share one
        engine, as on a test machine; each is still deterministic)."""
        return f"{workload}.{self.host}"

    def _start(self, name: str, spec: dict[str, Any]) -> ContainerStatus | None:
        """Start the workload's container; its status, or None when it could not be made
        (the failure is kept for the report)."""
        try:
            container = self.container_spec(spec)
            log.info("starting %s (%s)", name, spec["image"])
            status = self.runtime.run(container)
            self.failed.pop(name, None)
            return status
        except Busy as exc:  # not a failure: tried again next pass
            log.info("%s waits: %s", name, exc)
            self.unfinished.add(name)
        except RuntimeFailure as exc:
            log.warning("cannot start %s: %s", name, exc)
            self.failed[name] = (str(spec["fingerprint"]), str(exc))
        except (KeyError, TypeError, ValueError) as exc:  # a spec this agent cannot read
            log.warning("cannot start %s: bad spec: %r", name, exc)
            self.failed[name] = (
                str(spec.get("fingerprint")),
                f"the agent cannot read its spec: {exc!r}",
            )
        return None

    def container_spec(self, spec: dict[str, Any]) -> ContainerSpec:
        """The runtime's spec of a wanted container. RuntimeFailure when it asks for a GPU this
        host lacks or model weights it does not cache."""
        indices = [int(g["index"]) for g in spec.get("gpus", [])]
        missing = [i for i in indices if i not in self.devices]
        if missing:
            raise RuntimeFailure(f"this host has no GPU {missing[0]}")
        mounts: list[Mount] = []
        weights = spec.get("weights")
        if weights:
            source = self.weights_dir / str(weights["id"])
            if not source.is_dir():
                raise RuntimeFailure(f"model weights {weights['id']} are not cached at {source}")
            mounts.append(Mount(str(source), str(weights["mount"]), read_only=True))
        for volume in spec.get("volumes") or ():
            if self.volumes is None:
                raise RuntimeFailure("this agent keeps no volumes")
            point = self.volumes.attach(volume)
            mounts.append(Mount(str(point), str(volume["path"]), read_only=False))
        labels = {
            LABEL_HOST: self.host,
            LABEL_WORKLOAD: str(spec["workload"]),
            LABEL_FINGERPRINT: str(spec["fingerprint"]),
        }
        devices = tuple(self.devices[i] for i in indices)
        if spec.get("kind") == "app":
            if self.apps is None:
                raise RuntimeFailure("this agent runs no app replicas")
            name = self.box(str(spec["workload"]))
            return self.apps.container_spec(name, spec, labels, devices)
        host_network = spec.get("network") == "host"
        ssh_port = free_port(self.address) if host_network else None
        if ssh_port is not None:
            labels[LABEL_SSH_PORT] = str(ssh_port)
        if spec.get("disk") and self.copies is not None:
            self.copies.fetch(spec)  # Busy while its disk is on its way here
        image, config_image = disks.source(self.runtime, spec)
        return ContainerSpec(
            name=self.box(str(spec["workload"])),
            image=image,
            config_image=config_image,
            labels=labels,
            command=spec.get("command"),
            env={str(k): str(v) for k, v in (spec.get("env") or {}).items()},
            devices=devices,
            cpus=float(spec["cpus"]) if spec.get("cpus") else None,
            memory_mb=int(spec["memory_mb"]) if spec.get("memory_mb") else None,
            ports=tuple(int(p) for p in spec.get("ports") or ()),
            publish_address=self.address,
            ssh_keys=str(spec.get("ssh_keys") or "") or None,
            mounts=tuple(mounts),
            hosts={str(k): str(v) for k, v in (spec.get("hosts") or {}).items()},
            hostname=spec.get("hostname"),
            # renters' containers on one host never reach each other's unpublished ports
            network="host" if host_network else PRIVATE,
            ssh_port=ssh_port,
        )

    def _report(
        self, name: str, spec: dict[str, Any], status: ContainerStatus | None
    ) -> dict[str, Any]:
        """The workload's report from `status`, its container's as this pass listed or started
        it (None: it has none)."""
        report: dict[str, Any] = {"workload": name}
        box = self.box(name)
        if status is None:
            failure = self.failed.get(name)
            if failure is not None and failure[0] == spec["fingerprint"]:
                return report | {"state": FAILED, "error": failure[1]}
            return report | {"state": PENDING}
        report["ports"] = {str(k): v for k, v in status.ports.items()}
        if spec.get("network") == "host":  # nothing published: the host's own ports
            report["ports"] = {str(p): int(p) for p in spec.get("ports") or ()}
            if status.labels.get(LABEL_SSH_PORT):
                report["ports"]["22"] = int(status.labels[LABEL_SSH_PORT])
        if status.state == ContainerState.EXITED or status.error:
            report |= {"state": EXITED, "exit_code": status.exit_code, "error": status.error}
            report["logs"] = self.runtime.logs(box, LOG_LINES)[-4000:]
            return report
        if status.state != ContainerState.RUNNING:
            return report | {"state": PENDING}
        report["state"] = RUNNING
        if spec.get("kind") == "app" and self.apps is not None:
            report |= self.apps.report(box, spec, status)
            if "probes" not in report:
                self.unfinished.add(name)  # ask whether it answers again soon
            return report
        probes = self._probes(box, spec, status, report["ports"])
        if probes is not None and "no_sshd" in probes:
            error = f"the image {spec['image']} has no /usr/sbin/sshd: SSH cannot be offered"
            return report | {"state": FAILED, "error": error}
        if probes is not None:
            report["probes"] = probes
            applied = self._peers(box, spec, status)
            if applied is not None:
                report["peers"] = applied
                if self.real_gpus and int(spec.get("rank", 0)) == 0:
                    across = self._across(box, spec, status, applied)
                    if across is None:
                        self.unfinished.add(name)
                    else:
                        report["probes"] = {**probes, **across}
        return report

    def _across(
        self, name: str, spec: dict[str, Any], status: ContainerStatus, digest: str
    ) -> dict[str, str] | None:
        """The head's all-reduce across the cluster's nodes (`nccl.cluster_probe`): once per
        start and peers version; None until every worker lets the head in."""
        started = str(status.started_at)
        found = self.across.get(name)
        if found is not None and found[:2] == (started, digest):
            return found[2]
        try:
            probe = nccl.cluster_probe(self.runtime, name, spec)
        except RuntimeFailure:
            return None
        if probe is not None:
            self.across[name] = (started, digest, probe)
        return probe

    def _peers(self, name: str, spec: dict[str, Any], status: ContainerStatus) -> str | None:
        """Let the cluster's nodes in (`spec["peers"]`: every node's key, and an ssh config
        naming each by its hostname) and write its hostfile (`core.cluster.HOSTFILE_PATH`):
        once per start and peers version. The version
        applied, or None."""
        peers = spec.get("peers")
        if not peers:
            return None
        started = str(status.started_at)
        if self.applied.get(name) == (started, peers["digest"]):
            return str(peers["digest"])
        try:
            code, out = self.runtime.exec(name, clusters.peers_argv(spec, peers), 30)
        except RuntimeFailure:
            return None
        if code != 0:
            log.warning("cannot let %s's peers in: %s", name, out[-300:])
            return None
        self.applied[name] = (started, str(peers["digest"]))
        return str(peers["digest"])

    def _probes(
        self, name: str, spec: dict[str, Any], status: ContainerStatus, ports: dict[str, int]
    ) -> dict[str, Any] | None:
        """What the readiness gate reads from inside the container, once per start: the keys
        sshd holds, and on real GPUs the node's all-reduce (nccl-tests). None while the
        container is not ready to answer yet: keys not installed, or sshd not greeting on the
        published port (a renter told "running" can log in at once)."""
        started = str(status.started_at)
        cached = self.probes.get(name)
        if cached is not None and cached[0] == started:
            return cached[1]
        probes: dict[str, Any] = {"authorized_keys": ""}
        if spec.get("ssh_keys"):
            # sshd greets only after the entrypoint installed the keys: until then, no engine
            # call, but one per start asking whether the image has sshd at all once it has
            # been silent for a while (sshd greets within a second where there is one)
            if "22" in ports and not ssh_greets(self.address, ports["22"]):
                since = self.silent_since.get(name)
                if since is None or since[0] != started:
                    self.silent_since[name] = since = (started, time.monotonic())
                if time.monotonic() - since[1] > SSHD_GRACE_SECONDS:
                    if self._lacks_sshd(name):
                        probes = {"no_sshd": "true"}
                        self.probes[name] = (started, probes)
                        return probes
                    self.silent_since[name] = (started, math.inf)
                return None
            out = self._read_first(
                name, "/root/.ssh/authorized_keys", "/run/cardhour/authorized_keys"
            )
            if out is None:
                return None  # the container stopped meanwhile: the next pass says how
            probes["authorized_keys"] = out
        if spec.get("cluster"):
            key = self._cluster_key(name)
            if key is None:
                return None
            probes["cluster_key"] = key
        gpus = len(spec.get("gpus", []))
        if self.real_gpus and gpus >= 2:
            probes |= nccl.node_probe(self.runtime, name, str(spec["image"]), gpus)
        self.probes[name] = (started, probes)
        return probes

    def _lacks_sshd(self, name: str) -> bool:
        try:
            code, _ = self.runtime.exec(name, ["test", "-x", "/usr/sbin/sshd"], 30)
        except RuntimeFailure:
            return False  # not running any more: the next pass reports how it ended
        return code == 1

    def _cluster_key(self, name: str) -> str | None:
        """The public half of the node's own key (made in the container on first ask), which
        the cluster's other nodes let in."""
        script = (
            "test -f /root/.ssh/id_ed25519 || "
            "(mkdir -p /root/.ssh && ssh-keygen -q -t ed25519 -N '' -f /root/.ssh/id_ed25519) "
            "&& cat /root/.ssh/id_ed25519.pub"
        )
        try:
            code, out = self.runtime.exec(name, ["sh", "-c", script], 30)
        except RuntimeFailure:
            return None
        return out.strip() if code == 0 and out.startswith("ssh-") else None

    def _read_first(self, name: str, *paths: str) -> str | None:
        """The first of `paths` that can be read inside container `name`; None when none can
        (or the container stopped meanwhile: the next pass reports it as exited)."""
        for path in paths:
            try:
                code, out = self.runtime.exec(name, ["cat", path], 30)
            except RuntimeFailure:
                return None
            if code == 0:
                return out
        return None


def ssh_greets(address: str, port: int, timeout: float = 2.0) -> bool:
    """Whether an SSH server answers at address:port (its `SSH-` version line)."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as conn:
            conn.settimeout(timeout)
            return conn.recv(4).startswith(b"SSH-")
    except OSError:
        return False
