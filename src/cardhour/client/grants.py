"""The sponsorship proposals' calls of `CardhourClient`: a team's proposals, reviewers'
assignments and scores, notifications, and the operators' assignments and decisions."""

from __future__ import annotations

from urllib.parse import quote

from cardhour.api.schemas.grants import (
    AssignmentRead,
    DecisionCreate,
    DecisionRead,
    NotificationRead,
    ProposalCreate,
    ProposalRead,
    ProposalUpdate,
    ReviewCreate,
    ReviewerRead,
    ReviewRead,
)
from cardhour.client.connection import Connection


class ProposalCalls(Connection):
    """/proposals, /reviews, /notifications and /admin/proposals: each method is one request
    (see `Connection` for errors and retries)."""

    def create_proposal(self, body: ProposalCreate) -> ProposalRead:
        """A new draft; the caller and `body.members` are its team."""
        return self._call(ProposalRead, "POST", "/proposals", json=body.model_dump(mode="json"))

    def update_proposal(self, proposal_id: str, body: ProposalUpdate) -> ProposalRead:
        """Change the fields set in `body` (only while the proposal is editable)."""
        payload = body.model_dump(mode="json", exclude_unset=True)
        return self._call(ProposalRead, "PATCH", _proposal_path(proposal_id), json=payload)

    def upload_proposal_document(self, proposal_id: str, pdf: bytes) -> ProposalRead:
        """Attach a PDF (at most 5 MiB), sent as the raw body with `application/pdf`."""
        path = _proposal_path(proposal_id, "/document")
        headers = {"Content-Type": "application/pdf"}
        return self._call(ProposalRead, "PUT", path, content=pdf, headers=headers)

    def submit_proposal(self, proposal_id: str) -> ProposalRead:
        return self._call(ProposalRead, "POST", _proposal_path(proposal_id, "/submit"))

    def withdraw_proposal(self, proposal_id: str, reason: str | None = None) -> ProposalRead:
        path = _proposal_path(proposal_id, "/withdraw")
        return self._call(ProposalRead, "POST", path, json={"reason": reason})

    def list_proposals(self) -> list[ProposalRead]:
        """The proposals whose team the caller is on."""
        return self._call(list[ProposalRead], "GET", "/proposals")

    def get_proposal(self, proposal_id: str) -> ProposalRead:
        """One proposal (team, assigned reviewers, admins), with the grant's usage once approved."""
        return self._call(ProposalRead, "GET", _proposal_path(proposal_id))

    def review_assignments(self) -> list[AssignmentRead]:
        """The proposals assigned to the caller (reviewer role)."""
        return self._call(list[AssignmentRead], "GET", "/reviews")

    def declare_conflict(self, proposal_id: str, reason: str) -> ReviewerRead:
        path = f"/reviews/{quote(proposal_id, safe='')}/conflict"
        return self._call(ReviewerRead, "POST", path, json={"reason": reason})

    def score_proposal(self, proposal_id: str, body: ReviewCreate) -> ReviewRead:
        path = f"/reviews/{quote(proposal_id, safe='')}"
        return self._call(ReviewRead, "POST", path, json=body.model_dump())

    def notifications(self, limit: int = 50) -> list[NotificationRead]:
        """The caller's notifications, newest first."""
        return self._call(list[NotificationRead], "GET", "/notifications", params={"limit": limit})

    def admin_list_proposals(self, status: str | None = None) -> list[ProposalRead]:
        params = {"status": status} if status else {}
        return self._call(list[ProposalRead], "GET", "/admin/proposals", params=params)

    def admin_assign_reviewers(self, proposal_id: str, emails: list[str]) -> ProposalRead:
        path = f"/admin/proposals/{quote(proposal_id, safe='')}/reviewers"
        return self._call(ProposalRead, "POST", path, json={"reviewers": emails})

    def admin_decide(self, proposal_id: str, body: DecisionCreate) -> DecisionRead:
        """Approve (issues the grant), reject or ask for changes."""
        path = f"/admin/proposals/{quote(proposal_id, safe='')}/decision"
        return self._call(DecisionRead, "POST", path, json=body.model_dump(mode="json"))


def _proposal_path(proposal_id: str, suffix: str = "") -> str:
    return f"/proposals/{quote(proposal_id, safe='')}{suffix}"
