"""nccl-tests inside renters' containers: what the readiness gate's NCCL check reads on real GPUs
(stand-in GPUs run none; the control plane models theirs).

A node: `all_reduce_perf` over the container's GPUs. A cluster: from the head (rank 0), once
every node lets the others in, `mpirun` over the cluster's hostfile (`core.cluster.HOSTFILE_PATH`,
`HOSTNAME slots=GPUS`: one rank per GPU) runs `all_reduce_perf -g 1` on every GPU of every node,
reaching the workers by ssh (the peers' keys and ssh config the agent installed). An image
without the programs (`all_reduce_perf`, `mpirun`, `ssh`) is not its GPUs' fault: the probe
says it is unavailable, and the gate records the check as not measured.
"""

from __future__ import annotations

from typing import Any

from cardhour.core.cluster import HOSTFILE_PATH
from cardhour.runtime.base import ContainerRuntime

#: the gate's sweep: 8 B to 8 GiB, doubling
SWEEP = ["-b", "8", "-e", "8G", "-f", "2"]
TIMEOUT_SECONDS = 600
#: how a program that is not in the image shows: a shell's codes, Open MPI's words
NOT_THERE_CODES = (126, 127)
MPI_CANNOT_EXECUTE = "could not access or execute an executable"


def missing(code: int, out: str, *programs: str) -> bool:
    """Whether exit `code` with output `out` says one of `programs` is not in the image."""
    if MPI_CANNOT_EXECUTE in out:
        return True
    return code in NOT_THERE_CODES and any(p in out for p in programs)


def node_probe(runtime: ContainerRuntime, name: str, image: str, gpus: int) -> dict[str, str]:
    """`all_reduce_perf` over `gpus` GPUs of container `name`: `{"all_reduce": output}`, or
    `{"all_reduce_unavailable": why}`."""
    code, out = runtime.exec(name, ["all_reduce_perf", *SWEEP, "-g", str(gpus)], TIMEOUT_SECONDS)
    if missing(code, out, "all_reduce_perf"):
        why = f"the image {image} has no all_reduce_perf (nccl-tests): NCCL bandwidth not measured"
        return {"all_reduce_unavailable": why}
    return {"all_reduce": out}


def cluster_probe(
    runtime: ContainerRuntime, name: str, spec: dict[str, Any]
) -> dict[str, str] | None:
    """From the head container `name` of the cluster whose `spec` (with its `peers`) it runs:
    `{"cluster_all_reduce": output}` or `{"cluster_all_reduce_unavailable": why}`; None while
    a worker does not let the head in yet (it has not installed the peers: ask again)."""
    nodes = spec["peers"]["ssh"]
    others = [str(p["host"]) for p in nodes if p["host"] != spec.get("hostname")]
    check = 'for h in "$@"; do ssh -o BatchMode=yes -o ConnectTimeout=5 "$h" true || exit $?; done'
    code, out = runtime.exec(name, ["sh", "-c", check, "sh", *others], 60)
    image = spec.get("image")
    if missing(code, out, "ssh"):
        return {"cluster_all_reduce_unavailable": f"the image {image} has no ssh client"}
    if code != 0:
        return None
    ranks = len(nodes) * len(spec.get("gpus") or ())
    argv = ["mpirun", "--allow-run-as-root", "--hostfile", HOSTFILE_PATH, "-np", str(ranks)]
    code, out = runtime.exec(name, [*argv, "all_reduce_perf", *SWEEP, "-g", "1"], TIMEOUT_SECONDS)
    if missing(code, out, "mpirun", "all_reduce_perf"):
        why = (
            f"the image {image} has no mpirun or no all_reduce_perf (nccl-tests built with "
            "MPI=1): NCCL bandwidth across nodes not measured"
        )
        return {"cluster_all_reduce_unavailable": why}
    return {"cluster_all_reduce": out}
