"""What a multi-node instance (a cluster) looks like to the jobs on it. Pure.

Node 0 (the first node id in sort order) is the head. Users type `ssh NAME`, so the head's
hostname is `NAME` and the workers are `NAME-worker1`, `NAME-worker2`, … in node order (as
SkyPilot names them). Each node gets:

- a hostfile line `HOSTNAME slots=GPUS` (the DeepSpeed / Open MPI format);
- the environment torchrun and friends read: `MASTER_ADDR` (the head), `MASTER_PORT`,
  `NNODES`, `NODE_RANK`, `NPROC_PER_NODE`, `WORLD_SIZE` (all GPUs), and for NCCL
  `NCCL_IB_HCA` (the node's rails, `mlx5_0…`, in rail order) or `NCCL_IB_DISABLE=1` where
  there is no InfiniBand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MASTER_PORT = 29500


@dataclass(frozen=True)
class ClusterNode:
    rank: int
    role: str  # "head" | "worker"
    hostname: str  # what `ssh` and the hostfile use
    node: str  # the fleet's node id
    address: str  # where it is reached
    gpus: int
    ib_rails: int


def layout(
    name: str,
    gpus_by_node: Mapping[str, Sequence[int]],
    addresses: Mapping[str, str],
    ib_rails: Mapping[str, int],
    order: Sequence[str] = (),
) -> list[ClusterNode]:
    """Ranks, roles and hostnames of the instance's nodes (head first): in `order` (the ranks
    as placed, a replacement node taking the rank of the node it replaced), nodes it does not
    list after those, by id."""
    ranked = [n for n in order if n in gpus_by_node]
    ranked += sorted(n for n in gpus_by_node if n not in ranked)
    nodes = []
    for rank, node in enumerate(ranked):
        nodes.append(
            ClusterNode(
                rank=rank,
                role="head" if rank == 0 else "worker",
                hostname=name if rank == 0 else f"{name}-worker{rank}",
                node=node,
                address=addresses.get(node, node),
                gpus=len(gpus_by_node[node]),
                ib_rails=ib_rails.get(node, 0),
            )
        )
    return nodes


#: where a cluster's nodes find `hostfile` (DeepSpeed's `--hostfile`, Open MPI's)
HOSTFILE_PATH = "/etc/cardhour/hostfile"


def hostfile(nodes: Sequence[ClusterNode]) -> str:
    return "".join(f"{n.hostname} slots={n.gpus}\n" for n in nodes)


def environment(nodes: Sequence[ClusterNode], rank: int) -> dict[str, str]:
    """The variables node `rank` runs its distributed job with."""
    me = nodes[rank]
    env = {
        "MASTER_ADDR": nodes[0].hostname,
        "MASTER_PORT": str(MASTER_PORT),
        "NNODES": str(len(nodes)),
        "NODE_RANK": str(rank),
        "NPROC_PER_NODE": str(me.gpus),
        "WORLD_SIZE": str(sum(n.gpus for n in nodes)),
    }
    if me.ib_rails:
        env["NCCL_IB_HCA"] = ",".join(f"mlx5_{k}" for k in range(me.ib_rails))
    else:
        env["NCCL_IB_DISABLE"] = "1"
    return env
