"""The hosts backend: the inventory is what the host agents report, and a launch is the
containers the platform wants on those hosts; the agents converge to them and report back.

Nothing here talks to a host: every call reads or writes the host directory (the database,
`services.hosts.book`), and each agent long-polls its own wanted containers. So `launch` and
`terminate` return at once, and `poll` reads the agents' last reports:

- `running` once every node's container runs and reported its probes (the keys it holds, sshd
  greeting on the published port);
  the connection then gives ssh (the head's address and published port) and every published
  port as `host:port`;
- `failed` when a container could not start or exited (the agent's reason and last log lines),
  or a host it was placed on stopped reporting (`lost_after_seconds`);
- `gone` once no container of the name is wanted or reported on a live host.

Stand-in hosts (test machines: fake GPUs, `standin` in their report) cannot run NCCL: their
all-reduce output is the modelled one of `core.readiness.modelled`, flagged in the connection.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from cardhour.backends.base import (
    Backend,
    BackendError,
    LaunchSpec,
    MachineState,
    PollResult,
    ProbeUnavailable,
    Probing,
    ProvisioningFailed,
)
from cardhour.core import cluster
from cardhour.core.catalog import Catalog
from cardhour.core.hosts import (
    EXITED,
    FAILED,
    RUNNING,
    STOPPED,
    ContainerInfo,
    HostInfo,
    node_spec,
    share,
)
from cardhour.core.readiness import modelled as reports
from cardhour.core.storage.volumes import DELETE_TASK, EXPORT_TASK
from cardhour.core.topology import NodeSpec

MAX_CACHED_SPECS = 100_000
COPY_SUFFIX = "-copy"  # a move's save of the kept disk: `<workload>-copy`, on its old host


class HostDirectory(Protocol):
    """What the backend needs of the database (`services.hosts.book.HostBook`)."""

    def hosts(self) -> list[HostInfo]: ...

    def want(self, workload: str, attempt: int, specs: dict[str, dict[str, Any]]) -> None: ...

    def unwant(self, workload: str) -> None: ...

    def containers(self, workload: str) -> list[ContainerInfo]: ...

    def lost_hosts_of(self, workload: str) -> dict[str, str]: ...

    def set_peers(self, workload: str, peers: dict[str, Any]) -> None: ...

    def stop(self, workload: str) -> None: ...

    def workloads(self, prefix: str) -> list[str]: ...


class HostsBackend(Backend, Probing):
    name = "hosts"

    def __init__(self, directory: HostDirectory, catalog: Catalog) -> None:
        self.directory = directory
        self.catalog = catalog
        self._dcs = {dc.id for dc in catalog.data_centres}
        self._specs: dict[tuple[str | None, ...], NodeSpec | None] = {}

    def _live(self) -> dict[str, tuple[HostInfo, NodeSpec]]:
        found = {}
        for host in self.directory.hosts():
            if host.lost is None and host.data_centre in self._dcs:
                spec = self._node_spec(host)
                if spec is not None:
                    found[host.name] = (host, spec)
        return found

    def _node_spec(self, host: HostInfo) -> NodeSpec | None:
        """`core.hosts.node_spec`, computed again only when the host's inventory or placement
        changed (it parses `ibstat`: a thousand hosts every second would cost a core)."""
        key = (host.name, host.inventory_key, host.data_centre, host.ib_leaf, host.ib_spine)
        if key not in self._specs:
            if len(self._specs) >= MAX_CACHED_SPECS:  # stale keys of changed hosts pile up
                self._specs.clear()
            self._specs[key] = node_spec(host, self.catalog.gpu_models)
        return self._specs[key]

    def sync_inventory(self) -> list[NodeSpec]:
        return [spec for _host, spec in self._live().values()]

    def launch(self, spec: LaunchSpec) -> None:
        live = self._live()
        missing = sorted(n for n in spec.gpus_by_node if n not in live)
        if missing:
            if any(c.wanted for c in self.directory.containers(spec.external_name)):
                return  # placed already: `poll` tells the host is lost
            raise BackendError(f"hosts not reporting: {', '.join(missing)}")
        image = self.catalog.image_ref(spec.image)
        addresses = {n: live[n][0].address or n for n in spec.gpus_by_node}
        name = spec.instance_name or spec.external_name
        rails = {n: live[n][1].ib_rails for n in spec.gpus_by_node}
        # ranks as placed: a node replacing a lost one takes its rank, the others keep theirs
        layout = cluster.layout(name, spec.gpus_by_node, addresses, rails, spec.node_order)
        hostnames = {node.node: node.hostname for node in layout}
        ranks = {node.node: node.rank for node in layout}
        wanted = {}
        for node, gpus in spec.gpus_by_node.items():
            host, node_spec_ = live[node]
            cpus, memory_mb = share(node_spec_, len(gpus))
            uuids = {int(g["index"]): str(g["uuid"]) for g in host.inventory.get("gpus", [])}
            wanted[node] = {
                "image": image,
                "command": spec.command if node == layout[0].node else None,
                "env": dict(spec.env),
                "gpus": [{"index": i, "uuid": uuids.get(i, "")} for i in sorted(gpus)],
                "cpus": cpus,
                "memory_mb": memory_mb,
                "ports": list(spec.ports),
                "ssh_keys": spec.ssh_key or "",
                "hostname": hostnames[node],
                "rank": ranks[node],
                "hosts": {hostnames[n]: addresses[n] for n in spec.gpus_by_node if n != node},
                "weights": {"id": spec.weights.id, "mount": spec.weights.mount}
                if spec.weights is not None
                else None,
                "exclusive": spec.exclusive,
            }
            if spec.volumes:  # only then: every other spec's fingerprint stays as it was
                wanted[node]["volumes"] = [v.spec() for v in spec.volumes]
            if spec.disk is not None and len(spec.gpus_by_node) == 1:
                wanted[node]["disk"] = spec.disk
                if spec.disk_from is not None:
                    wanted[node]["disk_copy"] = self._move(spec, host)
            if len(spec.gpus_by_node) > 1:  # whole hosts: their network, keys between nodes
                job = cluster.environment(layout, ranks[node])  # torchrun's; the renter's win
                job["CARDHOUR_HOSTFILE"] = cluster.HOSTFILE_PATH  # the agent writes it
                wanted[node] |= {"network": "host", "cluster": True, "env": job | dict(spec.env)}
                wanted[node]["hostfile"] = cluster.hostfile(layout)
        self.directory.want(spec.external_name, spec.attempt, wanted)

    def _move(self, spec: LaunchSpec, host: HostInfo) -> dict[str, str]:
        """A start moving the kept disk `spec.disk_from` to `host`: its host is asked to save
        it into the data centre's shared path (a task, `<workload>-copy`), where `host`'s agent
        loads it from (`agent.disk_copies`). Where from, as the placed spec carries it."""
        assert spec.disk_from is not None
        shared = self.catalog.storage.shared_path(host.data_centre or "")
        if shared is None:
            raise ProvisioningFailed(f"{host.data_centre} declares no shared storage to move by")
        source = spec.disk_from.rsplit(":", 1)[-1]
        archive = f"{shared.rstrip('/')}/disk-copies/{spec.external_name}.tar"
        task = {"kind": EXPORT_TASK, "image": spec.disk_from, "archive": archive}
        copy = f"{spec.external_name}{COPY_SUFFIX}"
        if not any(c.wanted for c in self.directory.containers(copy)):
            self.directory.want(copy, spec.attempt, {source: task})
        return {"from": source, "archive": archive}

    def poll(self, external_name: str) -> PollResult:
        containers = self.directory.containers(external_name)
        wanted = [c for c in containers if c.wanted]
        if any(c.spec.get("disk_copy") and not c.spec.get("stopped") for c in wanted):
            copy = [c for c in self.directory.containers(external_name + COPY_SUFFIX) if c.wanted]
            if copy and copy[0].state == FAILED:
                why = copy[0].report.get("error") or "the copy failed"
                return PollResult(MachineState.FAILED, message=f"moving its disk: {why}")
        if not wanted:
            if containers:  # being removed
                return PollResult(MachineState.PROVISIONING)
            return PollResult(MachineState.GONE)
        if all(c.spec.get("stopped") for c in wanted):  # a stop keeping its disk
            if not all(c.state == STOPPED for c in wanted):  # the agent's why (a full disk)
                said = "; ".join(str(c.report["error"]) for c in wanted if c.report.get("error"))
                return PollResult(MachineState.PROVISIONING, message=said)
            size = wanted[0].report.get("disk_gb")  # none: there was no container to keep
            kept = {"disk_host": wanted[0].host, "disk_gb": size} if size else {}
            return PollResult(MachineState.GONE, kept)
        lost = self.directory.lost_hosts_of(external_name)
        if lost:
            said = "; ".join(f"{h}: {why}" for h, why in sorted(lost.items()))
            return PollResult(MachineState.FAILED, message=f"host lost ({said})")
        for c in wanted:
            if c.state in (FAILED, EXITED):
                return PollResult(MachineState.FAILED, message=failure_reason(c))
        if not all(c.state == RUNNING and "probes" in c.report for c in wanted):
            return PollResult(MachineState.PROVISIONING)
        live = {h.name: h for h in self.directory.hosts()}
        if len(wanted) > 1 and not self._peers_in(external_name, wanted, live):
            return PollResult(MachineState.PROVISIONING)
        return PollResult(MachineState.RUNNING, self._connection(wanted, live))

    def _peers_in(
        self, external_name: str, wanted: list[ContainerInfo], live: dict[str, HostInfo]
    ) -> bool:
        """Whether every node of a cluster let the others in (their keys, an ssh config naming
        each node by its hostname); asks for it when not yet."""
        entries = [
            {
                "host": str(c.spec.get("hostname") or c.host),
                "address": live[c.host].address or c.host,
                "port": int(c.report.get("ports", {}).get("22", 22)),
            }
            for c in sorted(wanted, key=_rank)
        ]
        keys = sorted(str(c.report["probes"].get("cluster_key") or "") for c in wanted)
        if not all(keys):
            return False
        body = {"keys": keys, "ssh": entries}
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
        peers = {**body, "digest": digest}
        if any(c.spec.get("peers") != peers for c in wanted):
            self.directory.set_peers(external_name, peers)
            return False
        return all(c.report.get("peers") == digest for c in wanted)

    def terminate(self, external_name: str) -> None:
        self.directory.unwant(external_name)

    def started(self, external_name: str) -> None:
        """Unwant the instance's earlier workloads (`ch-<instance>-<attempt>`): a stopped one
        kept its disk for this one, which the platform now has running (its spec names the
        disk, so the agent keeps it)."""
        for workload in self.directory.workloads(external_name.rsplit("-", 1)[0] + "-"):
            if workload != external_name:
                self.directory.unwant(workload)

    def let_go_disk(self, external_name: str) -> None:
        """The instance is terminated: every workload of it is unwanted, its stopped ones too;
        its host's agent then removes the disk no wanted spec names."""
        self.directory.unwant(external_name)
        self.started(external_name)

    def stop(self, external_name: str) -> None:
        """A single container with a disk keeps it (its spec marked `stopped`: the agent stops
        and commits it, then reports `stopped`); anything else is terminated."""
        self.directory.unwant(external_name + COPY_SUFFIX)  # a move cut short: the original stays
        wanted = [c for c in self.directory.containers(external_name) if c.wanted]
        if len(wanted) == 1 and wanted[0].spec.get("disk"):
            self.directory.stop(external_name)
        else:
            self.directory.unwant(external_name)

    def remove_volume(self, volume_id: str, host: str, store: str | None) -> bool:
        """Asks `host`'s agent to remove the image (a wanted task `vol-delete-<id>`); True
        once it reported it done, and the task is no longer wanted."""
        workload = f"vol-delete-{volume_id}"
        found = [c for c in self.directory.containers(workload) if c.host == host and c.wanted]
        if found and found[0].state == EXITED and found[0].report.get("exit_code") == 0:
            self.directory.unwant(workload)
            return True
        if not found:
            if host not in self._live():
                return False  # asked again once it reports
            task = {"kind": DELETE_TASK, "volume": {"id": volume_id, "store": store}}
            self.directory.want(workload, 0, {host: task})
        return False

    def _connection(self, wanted: list[ContainerInfo], live: dict[str, HostInfo]) -> dict[str, Any]:
        by_host = {c.host: c for c in wanted}
        head = min(wanted, key=_rank)
        address = live[head.host].address or head.host
        ssh_port = int(head.report.get("ports", {}).get("22", 0))
        published = {
            str(port): f"{live[head.host].address or head.host}:{host_port}"
            for port, host_port in head.report.get("ports", {}).items()
            if port != "22"
        }
        connection: dict[str, Any] = {
            "host": address,
            "port": ssh_port,
            "user": "root",
            "ssh": f"ssh -p {ssh_port} root@{address}",
            "nodes": sorted(by_host),
            "hosts": {h: live[h].address or h for h in by_host},
            "ports": {h: int(by_host[h].report.get("ports", {}).get("22", 0)) for h in by_host},
            "published": published,
            "image": head.spec.get("image"),
            "ssh_key_injected": bool(head.spec.get("ssh_keys")),
        }
        if any(live[h].standin for h in by_host):
            connection["standin_gpus"] = True
            connection["note"] = "stand-in GPUs (a test machine): real containers, fake devices"
        return connection

    def _container(self, external_name: str, node: str) -> ContainerInfo:
        for c in self.directory.containers(external_name):
            if c.host == node and c.wanted and c.state == RUNNING:
                return c
        raise BackendError(f"{external_name} has no running container on {node}")

    def lost_nodes(self, external_name: str) -> dict[str, str]:
        return self.directory.lost_hosts_of(external_name)

    def authorized_keys(self, external_name: str, node: str) -> str:
        probes = self._container(external_name, node).report.get("probes") or {}
        if "authorized_keys" not in probes:
            raise BackendError(f"{node} has not reported the keys it holds yet")
        return str(probes["authorized_keys"])

    def topology(self, external_name: str, node: str) -> tuple[str, str | None]:
        self._container(external_name, node)
        host = self._host(node)
        topo = host.inventory.get("topology")
        if not topo:
            raise BackendError(f"{node} reported no `nvidia-smi topo -m`")
        ib = host.inventory.get("ibstat")
        return str(topo), (str(ib) if ib else None)

    def all_reduce(self, external_name: str, nodes: list[str], gpus_per_node: int) -> str:
        hosts = [self._host(n) for n in nodes]
        if all(h.standin for h in hosts):
            return self._standin_all_reduce(hosts, gpus_per_node)
        if len(nodes) == 1:
            probes = self._container(external_name, nodes[0]).report.get("probes") or {}
            if probes.get("all_reduce_unavailable"):
                raise ProbeUnavailable(str(probes["all_reduce_unavailable"]))
            text = probes.get("all_reduce")
            if text is None:
                raise BackendError(f"{nodes[0]} has not reported its all-reduce yet")
            return str(text)
        # from the head (rank 0), which need not be the first node by name
        first = min((self._container(external_name, n) for n in nodes), key=_rank)
        head = first.report.get("probes") or {}
        if head.get("cluster_all_reduce_unavailable"):
            raise ProbeUnavailable(str(head["cluster_all_reduce_unavailable"]))
        text = head.get("cluster_all_reduce")
        if text is None:
            raise BackendError("the head has not reported the all-reduce across nodes yet")
        return str(text)

    def _host(self, name: str) -> HostInfo:
        for host in self.directory.hosts():
            if host.name == name and host.lost is None:
                return host
        raise BackendError(f"host {name} is not reporting")

    def _standin_all_reduce(self, hosts: list[HostInfo], gpus_per_node: int) -> str:
        """Stand-in GPUs run no NCCL: the modelled output of a healthy node (or fabric)."""
        specs = [node_spec(h, self.catalog.gpu_models) for h in hosts]
        if any(s is None for s in specs):
            raise BackendError("a stand-in host reported no known GPU")
        nodes = [s for s in specs if s is not None]
        model = self.catalog.model_by_id(nodes[0].gpu_model)
        busbw = reports.node_busbw(model)
        if len(nodes) > 1:
            busbw = min(busbw, reports.fabric_busbw(nodes) or busbw)
        return reports.all_reduce_perf([h.name for h in hosts], gpus_per_node, model.name, busbw)


def _rank(container: ContainerInfo) -> int:
    return int(container.spec.get("rank", 0))


def failure_reason(container: ContainerInfo) -> str:
    """Why a failed or exited container is: the agent's reason and its last log lines."""
    report = container.report
    reason = str(report.get("error") or "")
    if container.state == EXITED:
        code = report.get("exit_code")
        reason = reason or f"the container exited (code {code})"
    logs = str(report.get("logs") or "").strip()
    if logs:
        tail = " | ".join(logs.splitlines()[-5:])
        reason += f"; last output: {tail}"
    return f"{container.host}: {reason or 'the container failed'}"
