"""`cardhour admin ...`: operator commands; the server refuses them without the admin role."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from cardhour.api.schemas import DefragRead, ReplicaShareRead
from cardhour.cli.common import JsonOption, KeyOption, UrlOption, connect, out, print_json
from cardhour.client.connection import new_idempotency_key


def defrag(
    ctx: typer.Context,
    gpu: Annotated[str, typer.Option("--gpu", help="MODEL:COUNT to make room for, e.g. A800:8.")],
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Ask the planner which movable instances to move so MODEL:COUNT fits. Nothing is moved."""
    with connect(ctx, url, api_key) as client:
        plan = client.defrag_plan(gpu)
    if as_json:
        print_json(plan)
        return
    request = escape(plan.request)
    if plan.reason is not None:
        out.print(f"no plan for {request}: {escape(plan.reason)}")
        return
    targets = escape(", ".join(plan.target_nodes))
    if plan.fits_now:
        out.print(f"{request} fits now on {targets}; nothing to move")
        return
    out.print(_moves_table(plan))
    count = len(plan.moves)
    out.print(
        f"after {count} move{'s' if count > 1 else ''}, {request} fits on {targets} "
        "(a proposal: migrate the instances yourself, then launch)"
    )


def _moves_table(plan: DefragRead) -> Table:
    table = Table(box=None, header_style="bold")
    for column in ("INSTANCE", "FROM", "TO", "GPUS"):
        table.add_column(column, no_wrap=True)
    for m in plan.moves:
        gpus = ",".join(str(g) for g in m.gpus)
        table.add_row(escape(m.instance), escape(m.from_node), escape(m.to_node), gpus)
    return table


def topup(
    ctx: typer.Context,
    email: Annotated[str, typer.Argument(help="The account to credit.")],
    amount: Annotated[str, typer.Argument(help="Decimal amount in the server's currency.")],
    reference: Annotated[
        str | None,
        typer.Option(
            "--reference",
            help="Your reference, e.g. the bank transfer id: the same reference is credited "
            "once. Default: a new one.",
        ),
    ] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Credit cash to an account (money received outside cardhour)."""
    with connect(ctx, url, api_key) as client:
        done = client.admin_top_up(email, amount, reference, idempotency_key=new_idempotency_key())
    if as_json:
        print_json(done)
        return
    out.print(
        f"credited {escape(done.amount)} {escape(done.currency)} to {escape(done.email)}",
        soft_wrap=True,
    )
    out.print(f"  reference {escape(done.reference)}, transfer {escape(done.transfer_id)}")


def nodes(
    ctx: typer.Context,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """The fleet: GPUs instances use per node, what marketplace app replicas hold, and the
    nodes out of scheduling with the reason."""
    with connect(ctx, url, api_key) as client:
        found = client.admin_nodes()
    if as_json:
        print_json(found)
        return
    table = Table(box=None, header_style="bold")
    for column in ("NODE", "DC", "GPUS", "USED", "APP REPLICAS", "IB LEAF", "STATE"):
        table.add_column(column)
    for n in found:
        state = (
            "ok"
            if n.schedulable
            else f"drained: {n.drained_reason}"
            if n.drained_reason
            else "gone"
        )
        table.add_row(
            escape(n.id),
            escape(n.data_centre),
            f"{n.gpu_count} × {escape(n.gpu)}",
            str(len(n.used_gpus)),
            escape(_replicas(n.app_replicas)),
            escape(n.ib_leaf or "-"),
            escape(state),
        )
    out.print(table)


def _replicas(shares: list[ReplicaShareRead]) -> str:
    """`rag-search GPU0 250m, tts CPU`: each replica's app and what it holds."""
    if not shares:
        return "-"
    return ", ".join(
        f"{r.app or '(gone)'} "
        + (" ".join(f"GPU{g} {r.gpu_milli}m" for g in r.gpus) if r.gpus else "CPU")
        for r in shares
    )


def resume(
    ctx: typer.Context,
    node: Annotated[str, typer.Argument(help="The node to put back into scheduling.")],
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Put a node the readiness gate drained back into scheduling (once it is repaired)."""
    with connect(ctx, url, api_key) as client:
        row = client.admin_resume_node(node)
    out.print(f"{escape(row.id)} is schedulable again ({row.free_gpus} GPUs free)")


def auth_events(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", help="How many, newest first.")] = 50,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Accounts and client addresses the sign-in throttle locked after too many failures."""
    with connect(ctx, url, api_key) as client:
        found = client.auth_events(limit)
    if as_json:
        print_json(found)
        return
    if not found:
        out.print("no locks")
        return
    table = Table()
    for column in ("AT", "KEY", "WHAT"):
        table.add_column(column)
    for e in found:
        table.add_row(f"{e.at:%Y-%m-%d %H:%M:%S}", escape(e.key), escape(e.detail))
    out.print(table)
