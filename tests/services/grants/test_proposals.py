"""Proposal services on both databases: a decision and its grant commit together or not at all;
the outbox drains."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import func, select

from cardhour.core.errors import InvalidInput
from cardhour.db.engine import transaction
from cardhour.db.models import NotificationRow, ProposalEventRow, UserRow
from cardhour.platform import Platform
from cardhour.services.accounts import notifications
from cardhour.services.billing import customers
from cardhour.services.grants import hours as grant_hours
from cardhour.services.grants import proposals
from cardhour.services.grants import reviews as proposal_reviews
from cardhour.services.grants.proposals import ProposalInput


def _users(platform: Platform) -> dict[str, UserRow]:
    now = platform.clock.now()
    users = {}
    with transaction(platform.sessions) as s:
        for name, role in (("admin", "admin"), ("alice", "user"), ("r1", "reviewer")):
            users[name] = customers.sign_up(
                s, f"{name}@example.com", "password123", now, platform.trial(), role=role
            )
        users["r2"] = customers.sign_up(
            s, "r2@example.com", "password123", now, platform.trial(), role="reviewer"
        )
    return users


def _reviewed(platform: Platform, users: dict[str, UserRow]) -> str:
    now = platform.clock.now()
    data = ProposalInput(
        title="T",
        abstract="A",
        institution="I",
        card_hours=80_000,
        gpu_models=["H100"],
        period_start=datetime(2026, 2, 1, tzinfo=UTC),
        period_end=datetime(2026, 8, 1, tzinfo=UTC),
        justification="J",
    )
    scores = {"technical_merit": 4, "feasibility": 4, "compute_justification": 4}
    with transaction(platform.sessions) as s:
        row = proposals.create(s, platform.catalog, users["alice"], data, now)
        proposals.submit(s, users["alice"], row.id, now)
        proposal_reviews.assign(
            s, users["admin"], row.id, ["r1@example.com", "r2@example.com"], now
        )
        for r in ("r1", "r2"):
            proposal_reviews.score(s, users[r], row.id, scores, "", now)
        return row.id


def test_a_failed_grant_issue_leaves_the_proposal_undecided(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    users = _users(platform)
    pid = _reviewed(platform, users)

    def issue(*_args: Any, **_kwargs: Any) -> Any:
        raise InvalidInput("the grant pool is closed")

    monkeypatch.setattr(grant_hours, "issue", issue)
    now = platform.clock.now()
    with pytest.raises(InvalidInput), transaction(platform.sessions) as s:
        proposal_reviews.decide(s, platform.catalog, users["admin"], pid, "approve", now, 50_000)
    with transaction(platform.sessions) as s:
        row = proposals.readable(s, pid, users["admin"])
        assert (row.status, row.grant_id, row.approved_hours) == ("submitted", None, None)
        actions = s.scalars(select(ProposalEventRow.action).order_by(ProposalEventRow.id)).all()
        assert actions == ["create", "submit"]
        count = s.scalar(select(func.count()).select_from(NotificationRow))
        assert count == 3  # submitted (alice), assigned (r1, r2): nothing about a decision


def test_the_outbox_drains(platform: Platform) -> None:
    users = _users(platform)
    _reviewed(platform, users)
    now = platform.clock.now()
    with transaction(platform.sessions) as s:
        pending = notifications.pending(s)
        assert sorted(n.user_id for n in pending) == sorted(
            [users["alice"].id, users["r1"].id, users["r2"].id]
        )
        notifications.mark_sent(s, pending, now)
    with transaction(platform.sessions) as s:
        assert notifications.pending(s) == []
        assert notifications.list_for(s, users["alice"].id)[0].sent_at is not None
