"""Rich renderings of instances, shared by `launch` and `status`. Server text is escaped."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.markup import escape
from rich.table import Table

from cardhour.api.schemas import InstanceRead, StartChoicesRead
from cardhour.core.states import InstanceStatus

_STYLES: dict[str, str] = {
    InstanceStatus.RUNNING: "green",
    InstanceStatus.PENDING: "yellow",
    InstanceStatus.PROVISIONING: "yellow",
    InstanceStatus.STOPPING: "yellow",
    InstanceStatus.FAILED: "red",
}


def status_text(status: str) -> str:
    """The status as markup, coloured by what it means for the user."""
    style = _STYLES.get(status, "dim")  # StrEnum members hash like their values
    return f"[{style}]{escape(status)}[/]"


def gpus_text(i: InstanceRead) -> str:
    """Its GPUs, or that it runs without any (to reach its kept disk, priced per hour)."""
    if i.no_gpu:
        return f"no GPU (CPU only, {i.price_per_card_hour} {i.currency}/hour)"
    return f"{i.count} × {i.gpu}"


def when(at: datetime) -> str:
    return at.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def instance_table(instances: list[InstanceRead]) -> Table:
    table = Table(box=None, header_style="bold")
    name_width = max([4, *(len(i.name) for i in instances)])
    table.add_column("NAME", no_wrap=True, min_width=name_width)
    for column in ("STATUS", "GPUS", "WHERE", "PER CARD-HOUR", "COST SO FAR", "CREATED"):
        table.add_column(column, no_wrap=True)
    for i in instances:
        table.add_row(
            escape(i.name),
            status_text(i.status),
            escape(gpus_text(i)),
            escape(i.data_centre or "-"),
            f"{i.price_per_card_hour} {i.currency}",
            f"{i.cost_so_far} {i.currency}",
            when(i.created_at),
        )
    return table


def instance_detail(i: InstanceRead) -> Table:
    """Key/value facts of one instance, including how to connect when it is running."""
    table = Table(box=None, show_header=False)
    table.add_column(style="bold")
    table.add_column()
    status = status_text(i.status)
    if i.status_reason:
        status += f" ({escape(i.status_reason)})"
    rows = [
        ("name", escape(i.name)),
        ("id", escape(i.id)),
        ("status", status),
        ("gpus", escape(gpus_text(i))),
        ("image", escape(i.image)),
        *_workload_rows(i),
        ("plan", escape(_plan_text(i))),
        ("movable", "yes (the operator may migrate it)" if i.movable else "no"),
        ("data centre", escape(i.data_centre or "-")),
        ("nodes", escape(", ".join(i.nodes) or "-")),
        ("price", f"{i.price_per_card_hour} {i.currency} per card-hour"),
        ("cost so far", f"{i.cost_so_far} {i.currency}"),
        ("held", f"{i.held} {i.currency}"),
        ("created", when(i.created_at)),
        *connection_rows(i),
        *((f"port {p}", escape(where)) for p, where in i.published.items()),
    ]
    for key, value in rows:
        table.add_row(key, value)
    return table


def _workload_rows(i: InstanceRead) -> list[tuple[str, str]]:
    """The renter's command, environment (names only: `status --json` has the values) and
    ports, where given."""
    rows = []
    if i.command is not None:
        rows.append(("command", escape(i.command)))
    if i.env:
        rows.append(("env", escape(", ".join(i.env))))
    if i.ports:
        rows.append(("ports", ", ".join(str(p) for p in i.ports)))
    if i.volumes:
        rows.append(("volumes", escape(", ".join(f"{v.volume}:{v.path}" for v in i.volumes))))
    return rows


def _plan_text(i: InstanceRead) -> str:
    if i.plan_until is None:
        return i.plan
    return f"{i.plan} until {i.plan_until:%Y-%m-%d %H:%M} UTC, then {i.at_expiry}"


def connection_rows(i: InstanceRead) -> list[tuple[str, str]]:
    """How to reach the instance: the ssh command first, then the backend's notes."""
    conn = i.connection or {}
    order = ["ssh", "host", "port", "user", "note"]
    keys = [k for k in order if k in conn] + sorted(
        k for k in conn if k not in order and k not in ("nodes", "image")
    )
    return [(k.replace("_", " "), escape(str(conn[k]))) for k in keys]


def events_table(i: InstanceRead) -> Table:
    table = Table(box=None, header_style="bold")
    for column in ("AT", "FROM", "TO", "REASON"):
        table.add_column(column)
    for e in i.events:
        table.add_row(
            when(e.at),
            escape(e.from_status or "-"),
            status_text(e.to_status),
            escape(e.reason or ""),
        )
    return table


def stages_table(i: InstanceRead) -> Table:
    """The readiness stages of the latest placement, with the gate's figures per stage."""
    table = Table(box=None, header_style="bold")
    for column in ("STAGE", "STARTED", "TOOK", "OUTCOME", "DETAIL"):
        table.add_column(column)
    for stage in i.stages:
        took = "-"
        if stage.finished_at is not None:
            took = f"{(stage.finished_at - stage.started_at).total_seconds():.0f} s"
        table.add_row(
            stage.name.replace("_", " "),
            when(stage.started_at),
            took,
            escape(stage.outcome or "running"),
            escape(_stage_detail(stage.name, stage.detail)),
        )
    return table


def _stage_detail(name: str, detail: dict[str, Any]) -> str:
    if name == "nccl_gate" and detail.get("nccl_busbw_gbps"):
        parts = [f"{n} {v:g} GB/s" for n, v in sorted(detail["nccl_busbw_gbps"].items())]
        if detail.get("across_nodes_gbps") is not None:
            parts.append(f"across {detail['across_nodes_gbps']:g} GB/s")
        return ", ".join(parts)
    if "problems" in detail:
        return "; ".join(f"{n}: {why}" for n, why in sorted(detail["problems"].items()))
    if name == "topology_detected":
        return "; ".join(sorted(set(detail.get("nodes", {}).values())))
    if name == "keys_injected":
        return f"{detail.get('keys', 0)} keys on {detail.get('nodes', 0)} node(s)"
    return str(detail.get("why", ""))


def cluster_table(i: InstanceRead) -> Table | None:
    """The nodes of a multi-node instance: rank, role, hostname (`ssh HOSTNAME`), node."""
    if i.cluster is None or len(i.cluster.nodes) < 2:
        return None
    table = Table(box=None, header_style="bold")
    for column in ("RANK", "ROLE", "HOSTNAME", "NODE", "GPUS", "ADDRESS"):
        table.add_column(column)
    for n in i.cluster.nodes:
        table.add_row(
            str(n.rank), n.role, escape(n.hostname), escape(n.node), str(n.gpus), escape(n.address)
        )
    return table


def choices_table(found: StartChoicesRead) -> Table:
    """How a stopped instance can start now (`cardhour start --choices`)."""
    where = escape(found.disk_host or "-")
    free = "free" if found.gpus_free else "taken"
    table = Table(title=f"its disk is kept on {where}; the GPUs there are {free}")
    table.add_column("choice")
    table.add_column("what it does")
    table.add_column("price / estimate")
    flags = {"wait": "--wait", "no_gpu": "--no-gpu", "move": "--move"}
    for c in found.choices:
        if c.mode == "move" and not c.available:
            note = "not now"
        elif c.mode == "move":
            note = f"copy ~{c.copy_seconds} s, not billed"
        elif c.price_per_hour is not None:
            note = f"{c.price_per_hour} {c.currency}/hour"
        else:
            note = ""
        table.add_row(flags.get(c.mode, c.mode), escape(c.detail), escape(note))
    return table
