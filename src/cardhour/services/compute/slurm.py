"""One-click Slurm: the files that make an instance's nodes a Slurm cluster of its own."""

from __future__ import annotations

from sqlalchemy.orm import Session

from cardhour.core import slurmconf
from cardhour.core.errors import Conflict
from cardhour.core.slurmconf import SlurmFiles
from cardhour.core.states import InstanceStatus
from cardhour.db.models import InstanceRow
from cardhour.services.compute.views import cluster_of
from cardhour.store.compute import nodes as node_store

S = InstanceStatus


def slurm_files(session: Session, row: InstanceRow) -> SlurmFiles:
    """One-click Slurm: the files that make the instance's nodes a Slurm cluster of its own
    (`core.slurmconf`), the head as controller, the IB leaves and spines as its tree.
    Conflict while the instance holds no nodes."""
    nodes = cluster_of(session, row)
    if not nodes or row.status != S.RUNNING.value:
        raise Conflict(f"instance {row.name} is {row.status}: Slurm needs it running")
    rows = {n.id: n for n in node_store.get_nodes(session, {c.node for c in nodes})}
    return slurmconf.render(
        row.name,
        [
            slurmconf.SlurmNode(
                name=n.hostname,
                address=n.address,
                gpus=n.gpus,
                gpu_type=row.gpu_model.lower(),
                cpus=rows[n.node].cpus,
                memory_mb=rows[n.node].memory_gb * 1024,
                leaf=rows[n.node].ib_leaf,
                spine=rows[n.node].ib_spine,
            )
            for n in nodes
        ],
    )
