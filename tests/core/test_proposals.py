"""The proposal state machine and input checks: table tests over every (state, action)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cardhour.core import proposals as rules
from cardhour.core.errors import InvalidInput, InvalidTransition
from cardhour.core.proposals import Action, ProposalStatus

S = ProposalStatus
ALLOWED = {
    (S.DRAFT, Action.SUBMIT): S.SUBMITTED,
    (S.SUBMITTED, Action.WITHDRAW): S.WITHDRAWN,
    (S.SUBMITTED, Action.APPROVE): S.APPROVED,
    (S.SUBMITTED, Action.REJECT): S.REJECTED,
    (S.SUBMITTED, Action.REQUEST_CHANGES): S.CHANGES_REQUESTED,
    (S.CHANGES_REQUESTED, Action.SUBMIT): S.SUBMITTED,
    (S.CHANGES_REQUESTED, Action.WITHDRAW): S.WITHDRAWN,
    (S.WITHDRAWN, Action.SUBMIT): S.SUBMITTED,
}


@pytest.mark.parametrize("state", list(S))
@pytest.mark.parametrize("action", list(Action))
def test_transition_table(state: ProposalStatus, action: Action) -> None:
    expected = ALLOWED.get((state, action))
    if expected is None:
        with pytest.raises(InvalidTransition):
            rules.transition(state, action)
    else:
        assert rules.transition(state.value, action) == expected


def test_final_states_go_nowhere_and_only_team_states_are_editable() -> None:
    assert all(not rules.ALLOWED_TRANSITIONS[s] for s in rules.FINAL)
    assert {S.DRAFT, S.CHANGES_REQUESTED, S.WITHDRAWN} == rules.EDITABLE
    with pytest.raises(rules.NotEditable, match="withdraw it first"):
        rules.check_editable("submitted")
    rules.check_editable("withdrawn")


@pytest.mark.parametrize("hours", [0, -1, 100_001, True, 1.5])
def test_hours_outside_the_range_are_refused(hours: object) -> None:
    with pytest.raises(rules.HoursOutOfRange) as err:
        rules.check_hours(hours)  # type: ignore[arg-type]
    assert err.value.code == "hours_out_of_range" and err.value.http_status == 422


def test_hours_bounds_and_an_approval_cap() -> None:
    assert rules.check_hours(1) == 1 and rules.check_hours(100_000) == 100_000
    assert rules.check_hours(50_000, at_most=80_000) == 50_000
    with pytest.raises(rules.HoursOutOfRange, match="1 to 80,000"):
        rules.check_hours(80_001, at_most=80_000)


def test_models_subset_scores_period() -> None:
    assert rules.check_models_subset(["H100", "H100"], ["A800", "H100"]) == ("H100",)
    with pytest.raises(InvalidInput):
        rules.check_models_subset(["L40S"], ["H100"])
    with pytest.raises(InvalidInput):
        rules.check_models_subset([], ["H100"])
    ok = {"technical_merit": 1, "feasibility": 5, "compute_justification": 3}
    assert rules.check_scores(ok) == ok
    for bad in ({**ok, "feasibility": 6}, {**ok, "feasibility": 0}, {**ok, "extra": 1}):
        with pytest.raises(InvalidInput):
            rules.check_scores(bad)
    with pytest.raises(InvalidInput):
        rules.check_scores({"technical_merit": 3, "feasibility": 3})
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(InvalidInput):
        rules.check_period(start, start)


def test_document_checks() -> None:
    rules.check_document(b"%PDF-1.4 ...", "application/pdf; charset=binary")
    with pytest.raises(rules.InvalidDocument):
        rules.check_document(b"<html>", "application/pdf")
    with pytest.raises(rules.InvalidDocument):
        rules.check_document(b"%PDF-1.4", "application/octet-stream")
    with pytest.raises(rules.DocumentTooLarge) as err:
        rules.check_document(b"%PDF-" + bytes(rules.MAX_DOCUMENT_BYTES), "application/pdf")
    assert (err.value.code, err.value.http_status) == ("document_too_large", 413)
