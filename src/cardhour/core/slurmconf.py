"""One-click Slurm for a tenant's cluster: the `slurm.conf`, `gres.conf` and `topology.conf` that
make its nodes a Slurm cluster of their own (the head runs slurmctld, every node a slurmd). Pure.

- `slurm.conf`: munge auth, `select/cons_tres` with GPUs as gres, `topology/tree` so Slurm
  places multi-node jobs under as few InfiniBand leaves as it can, one `NodeName` per node with
  its `Gres=gpu:<type>:<n>`, one default partition `gpu` over all nodes.
- `gres.conf`: `AutoDetect=nvml` on real GPU nodes; explicit `File=` lines when the GPU device
  files are given (tests use stand-ins, see shared/docs/SLURM.md).
- `topology.conf`: one `SwitchName` per IB leaf with its nodes, one per spine with its leaves
  (`fabric` for leaves of no known spine; a `core` switch above several spines).
Paths default to Debian's; `base` puts every state, spool, pid and log file under one directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SlurmNode:
    name: str  # the hostname inside the tenant cluster (llm, llm-worker1, …)
    address: str
    gpus: int
    gpu_type: str  # gres type, lower case: "h100"
    cpus: int
    memory_mb: int
    leaf: str | None = None
    spine: str | None = None
    port: int | None = None  # slurmd's port (None: SlurmdPort); several per host in tests
    host: str | None = None  # NodeHostname when the machine's hostname is not `name` (tests)


@dataclass(frozen=True)
class SlurmFiles:
    slurm_conf: str
    gres_conf: str
    topology_conf: str

    def as_dict(self) -> dict[str, str]:
        return {
            "slurm.conf": self.slurm_conf,
            "gres.conf": self.gres_conf,
            "topology.conf": self.topology_conf,
        }


def render(
    cluster: str,
    nodes: Sequence[SlurmNode],
    base: str | None = None,
    ctld_port: int = 6817,
    slurmd_port: int = 6818,
    gpu_files: str | None = None,
    munge_socket: str | None = None,
    controller_host: str | None = None,
    extra: Sequence[str] = (),
) -> SlurmFiles:
    """The files for `nodes` (the first runs slurmctld, on the machine named `controller_host`,
    by default the head's name). `gpu_files`: a `File=` pattern such as `/dev/nvidia[0-7]`
    (None: NVML auto-detection). `extra`: more `slurm.conf` lines."""
    if not nodes:
        raise ValueError("a Slurm cluster needs at least one node")
    head = nodes[0]
    spool = f"{base}/spool" if base else "/var/spool/slurmd"
    state = f"{base}/state" if base else "/var/spool/slurmctld"
    run = f"{base}/run" if base else "/run/slurm"
    logs = f"{base}/log" if base else "/var/log/slurm"
    lines = [
        f"# slurm.conf for the cardhour cluster {cluster}: {len(nodes)} node(s), head {head.name}",
        f"ClusterName={cluster}",
        f"SlurmctldHost={controller_host or head.name}({head.address})",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        *([f"AuthInfo=socket={munge_socket}"] if munge_socket else []),
        f"StateSaveLocation={state}",
        f"SlurmdSpoolDir={spool}/%n",
        f"SlurmctldPidFile={run}/slurmctld.pid",
        f"SlurmdPidFile={run}/slurmd-%n.pid",
        f"SlurmctldLogFile={logs}/slurmctld.log",
        f"SlurmdLogFile={logs}/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "GresTypes=gpu",
        "TopologyPlugin=topology/tree",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=batch_sched_delay=0",
        "EnforcePartLimits=ALL",
        "ReturnToService=2",
        "MinJobAge=3600",
        "MailProg=/bin/true",
        *extra,
    ]
    for n in nodes:
        port = f" Port={n.port}" if n.port is not None else ""
        host = f" NodeHostname={n.host}" if n.host is not None else ""
        lines.append(
            f"NodeName={n.name}{host} NodeAddr={n.address}{port} CPUs={n.cpus} "
            f"RealMemory={n.memory_mb} Gres=gpu:{n.gpu_type}:{n.gpus} State=UNKNOWN"
        )
    lines.append("PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    if gpu_files is None:
        gres = ["AutoDetect=nvml"]
    else:
        gres = ["AutoDetect=off"] + [
            f"NodeName={n.name} Name=gpu Type={n.gpu_type} File={gpu_files}" for n in nodes
        ]
    return SlurmFiles("\n".join(lines) + "\n", "\n".join(gres) + "\n", topology(nodes))


def topology(nodes: Sequence[SlurmNode]) -> str:
    """`topology.conf` (tree): leaves with their nodes, spines with their leaves."""
    leaves: dict[str, list[str]] = {}
    spine_of: dict[str, str | None] = {}
    for n in nodes:
        leaf = n.leaf or "leaf0"
        leaves.setdefault(leaf, []).append(n.name)
        spine_of.setdefault(leaf, n.spine)
    lines = [f"SwitchName={leaf} Nodes={','.join(names)}" for leaf, names in sorted(leaves.items())]
    spines: dict[str, list[str]] = {}
    for leaf, spine in sorted(spine_of.items()):
        spines.setdefault(spine or "fabric", []).append(leaf)
    if len(leaves) > 1:
        lines += [f"SwitchName={s} Switches={','.join(ls)}" for s, ls in sorted(spines.items())]
        if len(spines) > 1:
            lines.append(f"SwitchName=core Switches={','.join(sorted(spines))}")
    return "\n".join(lines) + "\n"
