"""Sponsorship proposals: the states, the one transition function, and the pure input checks.

A proposal moves only through `transition(current, action)`: the team submits and withdraws, an
admin decides. Withdrawn proposals stay editable and may be submitted again (like a draft);
approved and rejected are final.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum

from cardhour.core.errors import Conflict, Forbidden, InvalidInput, InvalidTransition

MIN_CARD_HOURS = 1
MAX_CARD_HOURS = 100_000
MAX_DOCUMENT_BYTES = 5 * 1024 * 1024
PDF_MAGIC = b"%PDF-"
PDF_CONTENT_TYPE = "application/pdf"
CRITERIA = ("technical_merit", "feasibility", "compute_justification")
MIN_SCORE, MAX_SCORE = 1, 5
REVIEWS_FOR_DECISION = 2


class ProposalStatus(StrEnum):
    DRAFT = "draft"  # the team edits it; nobody else sees it
    SUBMITTED = "submitted"  # frozen; assigned reviewers score it; an admin decides
    CHANGES_REQUESTED = "changes_requested"  # back with the team: edit, then submit again
    WITHDRAWN = "withdrawn"  # taken back by the team: editable, may be submitted again
    APPROVED = "approved"  # final: the grant is issued
    REJECTED = "rejected"  # final


class Action(StrEnum):
    SUBMIT = "submit"
    WITHDRAW = "withdraw"
    APPROVE = "approve"
    REJECT = "reject"
    REQUEST_CHANGES = "request_changes"


#: Where each action leads.
TARGET: dict[Action, ProposalStatus] = {
    Action.SUBMIT: ProposalStatus.SUBMITTED,
    Action.WITHDRAW: ProposalStatus.WITHDRAWN,
    Action.APPROVE: ProposalStatus.APPROVED,
    Action.REJECT: ProposalStatus.REJECTED,
    Action.REQUEST_CHANGES: ProposalStatus.CHANGES_REQUESTED,
}

#: The only transitions allowed: from each state, the states it may move to.
ALLOWED_TRANSITIONS: dict[ProposalStatus, frozenset[ProposalStatus]] = {
    ProposalStatus.DRAFT: frozenset({ProposalStatus.SUBMITTED}),
    ProposalStatus.SUBMITTED: frozenset(
        {
            ProposalStatus.WITHDRAWN,
            ProposalStatus.APPROVED,
            ProposalStatus.REJECTED,
            ProposalStatus.CHANGES_REQUESTED,
        }
    ),
    ProposalStatus.CHANGES_REQUESTED: frozenset(
        {ProposalStatus.SUBMITTED, ProposalStatus.WITHDRAWN}
    ),
    ProposalStatus.WITHDRAWN: frozenset({ProposalStatus.SUBMITTED}),
    ProposalStatus.APPROVED: frozenset(),
    ProposalStatus.REJECTED: frozenset(),
}

#: The team may edit the proposal (and its PDF) only in these states.
EDITABLE = frozenset(
    {ProposalStatus.DRAFT, ProposalStatus.CHANGES_REQUESTED, ProposalStatus.WITHDRAWN}
)
#: Decisions, which need the admin role and enough reviews.
DECISIONS = frozenset({Action.APPROVE, Action.REJECT, Action.REQUEST_CHANGES})
FINAL = frozenset({ProposalStatus.APPROVED, ProposalStatus.REJECTED})


class NotEditable(Conflict):
    code = "not_editable"


class HoursOutOfRange(InvalidInput):
    code = "hours_out_of_range"


class InvalidDocument(InvalidInput):
    code = "invalid_document"
    http_status = 400


class DocumentTooLarge(InvalidInput):
    code = "document_too_large"
    http_status = 413


class ConflictOfInterest(Forbidden):
    code = "conflict_of_interest"


class NotEnoughReviews(Conflict):
    code = "not_enough_reviews"


def transition(current: str, action: Action) -> ProposalStatus:
    """The state `action` leads to from `current`; raises `InvalidTransition` if not allowed."""
    status = ProposalStatus(current)
    new = TARGET[action]
    if new not in ALLOWED_TRANSITIONS[status]:
        raise InvalidTransition(
            f"cannot {action.value.replace('_', ' ')} a proposal that is {status.value}",
            state=status.value,
            action=action.value,
        )
    return new


def check_editable(current: str) -> None:
    status = ProposalStatus(current)
    if status not in EDITABLE:
        hint = "; withdraw it first" if status == ProposalStatus.SUBMITTED else ""
        raise NotEditable(f"a {status.value} proposal cannot be edited{hint}", state=status.value)


def check_hours(hours: int, at_most: int = MAX_CARD_HOURS) -> int:
    """`hours` if it is a whole number of card-hours in 1..`at_most`; raises `HoursOutOfRange`."""
    if isinstance(hours, bool) or not isinstance(hours, int):
        raise HoursOutOfRange("card_hours must be a whole number", field="card_hours")
    if not MIN_CARD_HOURS <= hours <= at_most:
        raise HoursOutOfRange(
            f"card_hours must be {MIN_CARD_HOURS} to {at_most:,}; got {hours:,}",
            field="card_hours",
            minimum=MIN_CARD_HOURS,
            maximum=at_most,
        )
    return hours


def check_period(start: datetime, end: datetime) -> None:
    if end <= start:
        raise InvalidInput("period_end must be after period_start", field="period_end")


def check_text(field: str, value: str, max_length: int, required: bool = True) -> str:
    value = (value or "").strip()
    if required and not value:
        raise InvalidInput(f"{field} must not be empty", field=field)
    if len(value) > max_length:
        raise InvalidInput(f"{field} is longer than {max_length} characters", field=field)
    if "\x00" in value:
        raise InvalidInput(f"{field} must not contain NUL characters", field=field)
    return value


def check_models_subset(granted: Iterable[str], requested: Iterable[str]) -> tuple[str, ...]:
    """The granted models (sorted, unique) if non-empty and all requested; else `InvalidInput`."""
    chosen, asked = set(granted), set(requested)
    if not chosen:
        raise InvalidInput("approve at least one GPU model", field="gpu_models")
    if not chosen <= asked:
        extra = ", ".join(sorted(chosen - asked))
        raise InvalidInput(f"GPU models not requested by the proposal: {extra}", field="gpu_models")
    return tuple(sorted(chosen))


def check_scores(scores: dict[str, int]) -> dict[str, int]:
    """One integer 1-5 for each of `CRITERIA`, nothing else."""
    unknown = set(scores) - set(CRITERIA)
    if unknown:
        raise InvalidInput(f"unknown criteria: {', '.join(sorted(unknown))}")
    for name in CRITERIA:
        value = scores.get(name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput(f"{name} must be a whole number {MIN_SCORE}-{MAX_SCORE}", field=name)
        if not MIN_SCORE <= value <= MAX_SCORE:
            raise InvalidInput(
                f"{name} must be {MIN_SCORE} to {MAX_SCORE}; got {value}", field=name
            )
    return {name: scores[name] for name in CRITERIA}


def check_document(data: bytes, content_type: str | None) -> None:
    """A PDF of at most `MAX_DOCUMENT_BYTES`, sent as `application/pdf`, starting `%PDF-`."""
    if len(data) > MAX_DOCUMENT_BYTES:
        raise DocumentTooLarge(
            f"the PDF is larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB",
            limit=MAX_DOCUMENT_BYTES,
        )
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    if kind != PDF_CONTENT_TYPE:
        raise InvalidDocument(f"send the PDF as {PDF_CONTENT_TYPE}, not {kind or 'nothing'!r}")
    if not data.startswith(PDF_MAGIC):
        raise InvalidDocument("the document is not a PDF (it does not start with %PDF-)")
