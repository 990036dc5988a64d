"""`cardhour grants apply|edit|submit|withdraw|status`: the applicant team's side of sponsorship
proposals, and `cardhour notifications`. Reviewers and admins: `cli/grants_review.py`.

Numbers and dates are parsed here, so bad input is one line and exit code 2 like server errors.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from cardhour.api.schemas.grants import ProposalCreate, ProposalRead, ProposalUpdate
from cardhour.cli.common import JsonOption, KeyOption, UrlOption, connect, out, print_json
from cardhour.cli.render import when
from cardhour.client import CardhourClient
from cardhour.core.errors import InvalidInput

Text = Annotated[str | None, typer.Option(help="Text, or @FILE to read it from a file.")]
Gpu = Annotated[
    list[str] | None, typer.Option("--gpu", help="A GPU model asked for (repeat for more).")
]
Member = Annotated[
    list[str] | None,
    typer.Option("--member", help="Email of another team member (repeat for more)."),
]
Hours = Annotated[str | None, typer.Option("--hours", help="Card-hours, 1 to 100,000.")]
Start = Annotated[str | None, typer.Option("--start", help="Period start, YYYY-MM-DD (UTC).")]
End = Annotated[str | None, typer.Option("--end", help="Period end, YYYY-MM-DD (UTC).")]
Pdf = Annotated[Path | None, typer.Option("--pdf", help="A PDF to attach (at most 5 MiB).")]
Id = Annotated[str, typer.Argument(help="The proposal id.")]


def parse_int(name: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.replace(",", "").replace("_", ""))
    except ValueError:
        raise InvalidInput(f"{name}: {value!r} is not a whole number") from None


def parse_day(name: str, value: str | None) -> datetime | None:
    """YYYY-MM-DD (midnight UTC) or an ISO timestamp (UTC when it names no zone)."""
    if value is None:
        return None
    try:
        at = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(f"{name}: {value!r} is not a date (YYYY-MM-DD)") from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _text(name: str, value: str | None) -> str | None:
    if value is None or not value.startswith("@"):
        return value
    try:
        return Path(value[1:]).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{name}: cannot read {value[1:]!r}: {exc}") from None


def _pdf(path: Path | None) -> bytes | None:
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"--pdf: cannot read {str(path)!r}: {exc.strerror}") from None


def _fields(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def apply(
    ctx: typer.Context,
    title: Annotated[str, typer.Option(help="Title of the project.")],
    abstract: Annotated[str, typer.Option(help="Abstract, or @FILE.")],
    institution: Annotated[str, typer.Option(help="The applicants' institution.")],
    hours: Annotated[str, typer.Option("--hours", help="Card-hours, 1 to 100,000.")],
    gpu: Annotated[list[str], typer.Option("--gpu", help="GPU model (repeat for more).")],
    start: Annotated[str, typer.Option("--start", help="Period start, YYYY-MM-DD (UTC).")],
    end: Annotated[str, typer.Option("--end", help="Period end, YYYY-MM-DD (UTC).")],
    justification: Annotated[str, typer.Option(help="Why this much compute, or @FILE.")],
    member: Member = None,
    pdf: Pdf = None,
    submit: Annotated[bool, typer.Option("--submit", help="Submit it for review too.")] = False,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Write a sponsorship proposal (a draft; `--submit` sends it for review at once)."""
    body = ProposalCreate(
        title=title,
        abstract=_text("--abstract", abstract) or "",
        institution=institution,
        card_hours=parse_int("--hours", hours) or 0,
        gpu_models=gpu,
        period_start=parse_day("--start", start) or datetime.min,
        period_end=parse_day("--end", end) or datetime.min,
        justification=_text("--justification", justification) or "",
        members=member or [],
    )
    document = _pdf(pdf)
    with connect(ctx, url, api_key) as client:
        proposal = client.create_proposal(body)
        proposal = _finish(client, proposal, document, submit)
    _show_one(proposal, as_json)


def _finish(
    client: CardhourClient, proposal: ProposalRead, document: bytes | None, submit: bool
) -> ProposalRead:
    if document is not None:
        proposal = client.upload_proposal_document(proposal.id, document)
    if submit:
        proposal = client.submit_proposal(proposal.id)
    return proposal


def edit(
    ctx: typer.Context,
    proposal_id: Id,
    title: Text = None,
    abstract: Text = None,
    institution: Text = None,
    hours: Hours = None,
    gpu: Gpu = None,
    start: Start = None,
    end: End = None,
    justification: Text = None,
    member: Member = None,
    pdf: Pdf = None,
    submit: Annotated[bool, typer.Option("--submit", help="Submit it for review after.")] = False,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Change a draft (or a proposal sent back for changes, or withdrawn). `--member` replaces
    the team (you stay on it)."""
    body = ProposalUpdate(
        **_fields(
            title=title,
            abstract=_text("--abstract", abstract),
            institution=institution,
            card_hours=parse_int("--hours", hours),
            gpu_models=gpu,
            period_start=parse_day("--start", start),
            period_end=parse_day("--end", end),
            justification=_text("--justification", justification),
            members=member,
        )
    )
    document = _pdf(pdf)
    with connect(ctx, url, api_key) as client:
        proposal = client.get_proposal(proposal_id)
        if body.model_fields_set:
            proposal = client.update_proposal(proposal_id, body)
        proposal = _finish(client, proposal, document, submit)
    _show_one(proposal, as_json)


def submit(
    ctx: typer.Context,
    proposal_id: Id,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Send a proposal for review (it can no longer be edited, unless withdrawn)."""
    with connect(ctx, url, api_key) as client:
        _show_one(client.submit_proposal(proposal_id), as_json)


def withdraw(
    ctx: typer.Context,
    proposal_id: Id,
    reason: Annotated[str | None, typer.Option(help="Why, for the record.")] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Take a proposal back from review; it can be edited and submitted again."""
    with connect(ctx, url, api_key) as client:
        _show_one(client.withdraw_proposal(proposal_id, reason), as_json)


def status(
    ctx: typer.Context,
    proposal_id: Annotated[
        str | None, typer.Argument(help="A proposal id; none: all yours.")
    ] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Your proposals; with an id, its state, reviews, history and, once approved, the grant's
    usage."""
    with connect(ctx, url, api_key) as client:
        if proposal_id is not None:
            _show_one(client.get_proposal(proposal_id), as_json)
            return
        proposals = client.list_proposals()
    if as_json:
        print_json(proposals)
        return
    if not proposals:
        out.print("no proposals yet: cardhour grants apply --help")
        return
    out.print(proposals_table(proposals))


def proposals_table(proposals: list[ProposalRead]) -> Table:
    table = Table(box=None, header_style="bold")
    for column in ("ID", "TITLE", "STATUS", "HOURS", "GPUS", "REVIEWS", "UPDATED"):
        table.add_column(column, no_wrap=column != "TITLE")
    for p in proposals:
        hours = f"{p.card_hours:,}"
        if p.approved_hours is not None:
            hours = f"{p.approved_hours:,} of {hours}"
        table.add_row(
            p.id,
            escape(p.title),
            escape(p.status),
            hours,
            escape(",".join(p.gpu_models)),
            str(p.reviews_count),
            when(p.updated_at),
        )
    return table


def _show_one(p: ProposalRead, as_json: bool) -> None:
    if as_json:
        print_json(p)
        return
    out.print(f"[bold]{escape(p.title)}[/] ({p.id}) — {escape(p.status)}", soft_wrap=True)
    out.print(f"  team:     {escape(', '.join(p.members))}", soft_wrap=True)
    out.print(f"  asked:    {p.card_hours:,} card-hours on {escape(', '.join(p.gpu_models))}")
    out.print(f"  period:   {p.period_start:%Y-%m-%d} to {p.period_end:%Y-%m-%d} UTC")
    pdf = f"{p.document.bytes:,} bytes" if p.document else "none"
    out.print(f"  PDF:      {pdf}")
    out.print(f"  reviews:  {p.reviews_count} (round {p.round})")
    if p.approved_hours is not None:
        models = escape(", ".join(p.approved_gpu_models))
        out.print(f"  granted:  {p.approved_hours:,} card-hours on {models} ({p.grant_id})")
    if p.decision_reason:
        out.print(f"  reason:   {escape(p.decision_reason)}", soft_wrap=True)
    if p.grant:
        g = p.grant
        out.print(
            f"  usage:    {g.get('used_card_hours')} used, {g.get('remaining_card_hours')} left, "
            f"{g.get('expired_card_hours')} expired ({g.get('status')}, until "
            f"{escape(str(g.get('expires_at')))})",
            soft_wrap=True,
        )
    for e in p.events:
        reason = f": {escape(e.reason)}" if e.reason else ""
        out.print(f"  {when(e.at)}  {escape(e.action)} → {escape(e.to_status)}{reason}")


def notifications(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 20,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Your notifications, newest first."""
    with connect(ctx, url, api_key) as client:
        rows = client.notifications(limit)
    if as_json:
        print_json(rows)
        return
    for n in rows:
        out.print(f"{when(n.created_at)}  {escape(n.subject)}", soft_wrap=True)
