"""A cast for the proposal tests: an admin, a team of two, two reviewers and a stranger."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from tests.conftest import Api

H = dict[str, str]
PDF = b"%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"


@dataclass
class Cast:
    api: Api
    admin: H
    alice: H  # creates the proposal
    bob: H  # on alice's team
    r1: H  # reviewer
    r2: H  # reviewer
    r3: H  # reviewer
    stranger: H
    emails: dict[str, str]

    def post(self, who: H, path: str, json: Any = None, status: int = 200) -> Any:
        r = self.api.client.post(f"/api/v1{path}", headers=who, json=json)
        assert r.status_code == status, r.text
        return r.json()

    def get(self, who: H, path: str, status: int = 200) -> Any:
        r = self.api.client.get(f"/api/v1{path}", headers=who)
        assert r.status_code == status, r.text
        return r.json()

    def error(self, response: Any) -> tuple[int, str]:
        return response.status_code, response.json()["error"]["code"]

    def draft(self, who: H | None = None, **changes: Any) -> dict[str, Any]:
        body = {
            "title": "Protein folding at scale",
            "abstract": "We fold proteins.",
            "institution": "University of Somewhere",
            "card_hours": 80_000,
            "gpu_models": ["H100"],
            "period_start": "2026-02-01T00:00:00Z",
            "period_end": "2026-08-01T00:00:00Z",
            "justification": "Each fold takes 8 H100s for a week.",
            "members": [self.emails["bob"]],
            **changes,
        }
        return self.post(who or self.alice, "/proposals", body, status=201)  # type: ignore[no-any-return]

    def submitted(self, **changes: Any) -> dict[str, Any]:
        p = self.draft(**changes)
        self.post(self.alice, f"/proposals/{p['id']}/submit")
        self.post(
            self.admin,
            f"/admin/proposals/{p['id']}/reviewers",
            {"reviewers": [self.emails["r1"], self.emails["r2"]]},
        )
        return p

    def score(self, who: H, proposal_id: str, value: int = 4, status: int = 200) -> Any:
        body = {
            "technical_merit": value,
            "feasibility": value,
            "compute_justification": value,
            "comments": "solid",
        }
        return self.post(who, f"/reviews/{proposal_id}", body, status=status)

    def reviewed(self, **changes: Any) -> dict[str, Any]:
        p = self.submitted(**changes)
        self.score(self.r1, p["id"], 5)
        self.score(self.r2, p["id"], 4)
        return p


def make_cast(api: Api) -> Cast:
    email, password = api.platform.bootstrap_admin()
    login = api.client.post("/api/v1/auth/login", json={"email": email, "password": password})
    admin = {"Authorization": f"Bearer {login.json()['api_key']}"}
    tag = uuid.uuid4().hex[:6]
    emails = {n: f"{n}-{tag}@example.com" for n in ("alice", "bob", "r1", "r2", "r3", "stranger")}
    heads = {n: api.signup(e) for n, e in emails.items()}
    for n in ("r1", "r2", "r3"):
        r = api.client.post(
            "/api/v1/admin/users/role", headers=admin, json={"email": emails[n], "role": "reviewer"}
        )
        assert r.status_code == 200 and r.json()["role"] == "reviewer", r.text
    return Cast(api, admin, emails=emails, **heads)
