"""`cardhour grants review|assign|decide|list` and `cardhour admin role`: the reviewers' and the
operators' side of sponsorship proposals. The server checks every role."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from cardhour.api.schemas.grants import AssignmentRead, DecisionCreate, ReviewCreate
from cardhour.cli.common import JsonOption, KeyOption, UrlOption, connect, out, print_json
from cardhour.cli.grants.proposals import Id, parse_int, proposals_table
from cardhour.core.errors import InvalidInput

Score = Annotated[str | None, typer.Option(help="1 to 5.")]
DECISIONS = {"approve": "approve", "reject": "reject", "changes": "request_changes"}
DECISIONS["request_changes"] = "request_changes"


def review(
    ctx: typer.Context,
    proposal_id: Annotated[
        str | None, typer.Argument(help="The proposal to score; none: list your assignments.")
    ] = None,
    technical_merit: Score = None,
    feasibility: Score = None,
    compute_justification: Score = None,
    comment: Annotated[str, typer.Option(help="Comments for the decision.")] = "",
    conflict: Annotated[
        str | None,
        typer.Option(help="Declare a conflict of interest, with this reason (no scores then)."),
    ] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Score a proposal assigned to you (each criterion 1-5), or declare a conflict of interest.
    Without an id: the proposals assigned to you."""
    scores = {
        "technical_merit": parse_int("--technical-merit", technical_merit),
        "feasibility": parse_int("--feasibility", feasibility),
        "compute_justification": parse_int("--compute-justification", compute_justification),
    }
    given = {k: v for k, v in scores.items() if v is not None}
    if proposal_id is None:
        with connect(ctx, url, api_key) as client:
            assignments = client.review_assignments()
        _show_assignments(assignments, as_json)
        return
    if conflict is not None:
        if given:
            raise InvalidInput("either --conflict or scores, not both")
        with connect(ctx, url, api_key) as client:
            done = client.declare_conflict(proposal_id, conflict)
        if as_json:
            print_json(done)
        else:
            out.print(f"conflict of interest declared for {escape(proposal_id)}")
        return
    missing = [f"--{k.replace('_', '-')}" for k, v in scores.items() if v is None]
    if missing:
        raise InvalidInput(f"missing scores: {', '.join(missing)}")
    body = ReviewCreate.model_validate({**given, "comments": comment})
    with connect(ctx, url, api_key) as client:
        scored = client.score_proposal(proposal_id, body)
    if as_json:
        print_json(scored)
        return
    out.print(
        f"scored {escape(proposal_id)}: technical merit {scored.technical_merit}, feasibility "
        f"{scored.feasibility}, compute justification {scored.compute_justification}"
    )


def _show_assignments(assignments: list[AssignmentRead], as_json: bool) -> None:
    if as_json:
        print_json(assignments)
        return
    if not assignments:
        out.print("nothing assigned to you")
        return
    table = Table(box=None, header_style="bold")
    for column in ("ID", "TITLE", "STATUS", "HOURS", "TEAM", "YOUR REVIEW"):
        table.add_column(column, no_wrap=column not in ("TITLE", "TEAM"))
    for a in assignments:
        mine = "conflict" if a.conflict else "to do"
        if a.my_review is not None:
            r = a.my_review
            mine = f"{r.technical_merit}/{r.feasibility}/{r.compute_justification}"
        table.add_row(
            a.proposal_id,
            escape(a.title),
            escape(a.status),
            f"{a.card_hours:,}",
            escape(", ".join(a.members)),
            mine,
        )
    out.print(table)


def assign(
    ctx: typer.Context,
    proposal_id: Id,
    reviewers: Annotated[list[str], typer.Argument(help="Emails of users with the reviewer role.")],
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Assign reviewers to a proposal (admin)."""
    with connect(ctx, url, api_key) as client:
        proposal = client.admin_assign_reviewers(proposal_id, reviewers)
    if as_json:
        print_json(proposal)
        return
    names = ", ".join(r.email for r in proposal.reviewers or [])
    out.print(f"{escape(proposal_id)} reviewers: {escape(names)}", soft_wrap=True)


def decide(
    ctx: typer.Context,
    proposal_id: Id,
    decision: Annotated[str, typer.Argument(help="approve, reject or changes.")],
    hours: Annotated[
        str | None, typer.Option("--hours", help="approve: card-hours (default: as asked).")
    ] = None,
    gpu: Annotated[
        list[str] | None,
        typer.Option("--gpu", help="approve: a GPU model among those asked (repeat)."),
    ] = None,
    reason: Annotated[str | None, typer.Option(help="Needed to reject or ask for changes.")] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Decide on a reviewed proposal (admin): approving issues the grant."""
    chosen = DECISIONS.get(decision.strip().lower())
    if chosen is None:
        raise InvalidInput(f"decision: {decision!r} is not approve, reject or changes")
    body = DecisionCreate(
        decision=chosen, card_hours=parse_int("--hours", hours), gpu_models=gpu, reason=reason
    )
    with connect(ctx, url, api_key) as client:
        done = client.admin_decide(proposal_id, body)
    if as_json:
        print_json(done)
        return
    p = done.proposal
    out.print(f"{escape(p.id)} is now {escape(p.status)}")
    if done.grant is not None:
        g = done.grant
        out.print(
            f"  grant {escape(g.id)}: {g.card_hours:,} card-hours on "
            f"{escape(', '.join(g.gpu_models))}, {g.valid_from:%Y-%m-%d} to {g.expires_at:%Y-%m-%d}"
        )


def list_all(
    ctx: typer.Context,
    state: Annotated[str | None, typer.Option("--status", help="Only this state.")] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Every proposal (admin)."""
    with connect(ctx, url, api_key) as client:
        proposals = client.admin_list_proposals(state)
    if as_json:
        print_json(proposals)
        return
    out.print(proposals_table(proposals))


def role(
    ctx: typer.Context,
    email: Annotated[str, typer.Argument(help="The account.")],
    new_role: Annotated[str, typer.Argument(metavar="ROLE", help="user, reviewer or admin.")],
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Give an account a role (admin)."""
    with connect(ctx, url, api_key) as client:
        user = client.admin_set_role(email, new_role)
    if as_json:
        print_json(user)
        return
    out.print(f"{escape(user.email)} is now {escape(user.role)}")
