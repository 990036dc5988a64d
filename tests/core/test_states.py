from __future__ import annotations

import pytest

from cardhour.core.states import ALLOWED_TRANSITIONS, InstanceStatus, can_transition

S = InstanceStatus


@pytest.mark.parametrize(
    ("current", "new", "allowed"),
    [
        (S.PENDING, S.PROVISIONING, True),
        (S.PROVISIONING, S.RUNNING, True),
        (S.RUNNING, S.STOPPING, True),
        (S.STOPPING, S.STOPPED, True),
        (S.STOPPED, S.PENDING, True),
        (S.STOPPING, S.TERMINATED, True),
        (S.PROVISIONING, S.FAILED, True),
        (S.RUNNING, S.TERMINATED, False),  # must release through stopping
        (S.TERMINATED, S.PENDING, False),
        (S.FAILED, S.RUNNING, False),
        (S.PENDING, S.RUNNING, False),
    ],
)
def test_transitions(current: S, new: S, allowed: bool) -> None:
    assert can_transition(current, new) is allowed


def test_every_state_has_a_rule_and_terminated_is_final() -> None:
    assert set(ALLOWED_TRANSITIONS) == set(S)
    assert ALLOWED_TRANSITIONS[S.TERMINATED] == frozenset()
