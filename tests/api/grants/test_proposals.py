"""Sponsorship proposals over HTTP, on both databases: the full path to a grant, who may do what,
limits, the PDF, tenant isolation and the notification outbox."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cardhour.core.money import MILLI_GPU_SECONDS_PER_CARD_HOUR
from cardhour.core.proposals import MAX_DOCUMENT_BYTES
from cardhour.db.engine import transaction
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import ledger
from cardhour.services.grants import hours as grant_hours
from tests.api.grants.proposal_helpers import PDF, Cast, make_cast
from tests.conftest import Api


@pytest.fixture
def cast(api: Api) -> Cast:
    return make_cast(api)


def _user_id(cast: Cast, who: dict[str, str]) -> str:
    return str(cast.get(who, "/auth/me")["id"])


def test_full_path_80000_h100_two_reviews_approve_50000_h100_spends_grant_a800_cash_expiry(
    cast: Cast,
) -> None:
    p = cast.draft()
    assert (p["status"], p["card_hours"], p["gpu_models"]) == ("draft", 80_000, ["H100"])
    assert sorted(p["members"]) == sorted([cast.emails["alice"], cast.emails["bob"]])
    pid = p["id"]
    r = cast.api.client.put(
        f"/api/v1/proposals/{pid}/document",
        headers={**cast.alice, "Content-Type": "application/pdf"},
        content=PDF,
    )
    assert r.status_code == 200 and r.json()["document"]["bytes"] == len(PDF)
    assert cast.post(cast.bob, f"/proposals/{pid}/submit")["status"] == "submitted"
    assigned = cast.post(
        cast.admin,
        f"/admin/proposals/{pid}/reviewers",
        {"reviewers": [cast.emails["r1"], cast.emails["r2"]]},
    )
    assert [x["email"] for x in assigned["reviewers"]] == sorted(
        [cast.emails["r1"], cast.emails["r2"]]
    )
    mine = cast.get(cast.r1, "/reviews")
    assert [(a["proposal_id"], a["my_review"]) for a in mine] == [(pid, None)]
    cast.score(cast.r1, pid, 5)
    cast.score(cast.r2, pid, 3)
    assert cast.get(cast.r1, "/reviews")[0]["my_review"]["technical_merit"] == 5

    decided = cast.post(
        cast.admin,
        f"/admin/proposals/{pid}/decision",
        {"decision": "approve", "card_hours": 50_000, "gpu_models": ["h100"]},
    )
    grant = decided["grant"]
    assert grant["id"] == f"proposal-{pid}" and grant["proposal_id"] == pid
    assert (grant["card_hours"], grant["gpu_models"]) == (50_000, ["H100"])
    assert grant["expires_at"].startswith("2026-08-01")
    proposal = decided["proposal"]
    assert (proposal["status"], proposal["approved_hours"]) == ("approved", 50_000)
    assert len(proposal["reviews"]) == 2 and proposal["reviews_count"] == 2

    team = [_user_id(cast, who) for who in (cast.alice, cast.bob)]
    stranger = _user_id(cast, cast.stranger)
    with transaction(cast.api.platform.sessions) as s:
        for user_id in team:
            rows = grant_hours.grants_of(s, user_id)
            assert [(g.id, g.card_hours, g.proposal_id) for g in rows] == [
                (f"proposal-{pid}", 50_000, pid)
            ]
        assert grant_hours.grants_of(s, stranger) == []
    _spend_then_expire(cast, grant["id"])

    shown = cast.get(cast.alice, f"/proposals/{pid}")
    assert shown["grant"]["granted_card_hours"].startswith("50000")
    assert shown["reviews"] is None and shown["reviews_count"] == 2  # no scores for the team
    assert [e["action"] for e in shown["events"]] == ["create", "submit", "approve"]
    # approving again is refused; the grant is not issued twice
    r = cast.api.client.post(
        f"/api/v1/admin/proposals/{pid}/decision", headers=cast.admin, json={"decision": "approve"}
    )
    assert cast.error(r) == (409, "invalid_transition")


def _spend_then_expire(cast: Cast, grant_id: str) -> None:
    """The approved grant in use: from the period's start a member's H100 hour is paid in grant
    hours (their money untouched) while an A800 hour is paid in cash; at the period's end the
    rest expires, and the ledger balances throughout."""
    api, bob = cast.api, cast.bob
    api.settle((datetime(2026, 2, 1, tzinfo=UTC) - api.clock.now()).total_seconds())
    assert cast.get(bob, f"/grants/{grant_id}")["status"] == "active"
    api.top_up(bob, "10")  # the 10 CNY trial credit ran out after 30 days: this is cash
    balance = cast.get(bob, "/balance")
    assert (balance["cash"], balance["trial_credit"]) == ("10.00", "0.00")
    for name, gpu in (("fold", "H100"), ("baseline", "A800")):
        cast.post(bob, "/instances", {"gpu": gpu, "count": 1, "name": name}, status=201)
    api.settle()
    api.settle(30)  # both running from here
    for _ in range(12):
        api.settle(300)
    for name in ("fold", "baseline"):
        cast.post(bob, f"/instances/{name}/stop")
    api.settle()
    fold, baseline = (cast.get(bob, f"/instances/{n}") for n in ("fold", "baseline"))
    assert (fold["status"], baseline["status"]) == ("stopped", "stopped")
    assert (fold["cost_so_far"], baseline["cost_so_far"]) == ("1.900000", "1.200000")
    assert cast.get(bob, "/balance")["available_exact"] == "8.800000"  # the A800 hour only
    report = cast.get(cast.alice, f"/grants/{grant_id}")
    assert report["used_card_hours"] == "1.000"  # within a milli-GPU-second a charge
    assert [line["name"] for line in report["by_instance"]] == ["fold"]
    assert [line["name"] for line in report["by_member"]] == [cast.emails["bob"]]
    cast.get(cast.stranger, f"/grants/{grant_id}", status=404)

    api.settle((datetime(2026, 8, 1, 0, 0, 1, tzinfo=UTC) - api.clock.now()).total_seconds())
    report = cast.get(cast.alice, f"/grants/{grant_id}")
    assert (report["status"], report["remaining_milli_gpu_seconds"]) == ("expired", 0)
    assert report["used_milli_gpu_seconds"] + report["expired_milli_gpu_seconds"] == (
        50_000 * MILLI_GPU_SECONDS_PER_CARD_HOUR
    )
    board = cast.get(cast.admin, "/admin/grants")
    assert (board["granted_card_hours"], board["used_card_hours"]) == ("50000.000", "1.000")
    with transaction(api.platform.sessions) as s:
        check = ledger.verify(s)
    assert check.balanced, check.problems


def test_a_conflicted_reviewer_cannot_score_and_their_score_stops_counting(cast: Cast) -> None:
    p = cast.submitted()
    cast.score(cast.r1, p["id"])
    assert cast.get(cast.admin, f"/proposals/{p['id']}")["reviews_count"] == 1
    done = cast.post(cast.r1, f"/reviews/{p['id']}/conflict", {"reason": "my former student"})
    assert done["conflict"] is True
    r = cast.api.client.post(
        f"/api/v1/reviews/{p['id']}",
        headers=cast.r1,
        json={"technical_merit": 5, "feasibility": 5, "compute_justification": 5},
    )
    assert cast.error(r) == (403, "conflict_of_interest")
    shown = cast.get(cast.admin, f"/proposals/{p['id']}")
    assert shown["reviews_count"] == 0
    assert [(x["conflict"], x["conflict_reason"]) for x in shown["reviewers"]][0] in (
        (True, "my former student"),
        (False, None),
    )
    assert any(x["conflict"] for x in shown["reviewers"])
    cast.score(cast.r2, p["id"])
    r = cast.api.client.post(
        f"/api/v1/admin/proposals/{p['id']}/decision",
        headers=cast.admin,
        json={"decision": "reject", "reason": "no"},
    )
    assert cast.error(r) == (409, "not_enough_reviews")


def test_users_without_the_role_cannot_review_assign_or_decide(cast: Cast) -> None:
    p = cast.reviewed()
    pid = p["id"]
    c = cast.api.client
    for who in (cast.stranger, cast.alice):
        assert cast.error(c.get("/api/v1/reviews", headers=who)) == (403, "forbidden")
        r = c.post(
            f"/api/v1/reviews/{pid}",
            headers=who,
            json={"technical_merit": 5, "feasibility": 5, "compute_justification": 5},
        )
        assert cast.error(r) == (403, "forbidden")
    for who in (cast.stranger, cast.alice, cast.r1):
        r = c.post(
            f"/api/v1/admin/proposals/{pid}/decision", headers=who, json={"decision": "approve"}
        )
        assert cast.error(r) == (403, "forbidden")
        r = c.post(
            f"/api/v1/admin/proposals/{pid}/reviewers",
            headers=who,
            json={"reviewers": [cast.emails["r3"]]},
        )
        assert cast.error(r) == (403, "forbidden")
        assert cast.error(c.get("/api/v1/admin/proposals", headers=who)) == (403, "forbidden")
        r = c.post(
            "/api/v1/admin/users/role",
            headers=who,
            json={"email": cast.emails["bob"], "role": "admin"},
        )
        assert cast.error(r) == (403, "forbidden")
    # a reviewer not assigned to it cannot score it (nor learn that it exists)
    r = c.post(
        f"/api/v1/reviews/{pid}",
        headers=cast.r3,
        json={"technical_merit": 5, "feasibility": 5, "compute_justification": 5},
    )
    assert cast.error(r) == (404, "not_found")
    assert cast.error(c.get(f"/api/v1/proposals/{pid}", headers=cast.r3)) == (404, "not_found")
    # still submitted: nothing above changed it
    assert cast.get(cast.admin, f"/proposals/{pid}")["status"] == "submitted"


def test_a_team_member_cannot_review_their_own_proposal(cast: Cast) -> None:
    p = cast.submitted()
    cast.post(cast.admin, "/admin/users/role", {"email": cast.emails["bob"], "role": "reviewer"})
    r = cast.api.client.post(
        f"/api/v1/admin/proposals/{p['id']}/reviewers",
        headers=cast.admin,
        json={"reviewers": [cast.emails["bob"]]},
    )
    assert cast.error(r) == (403, "conflict_of_interest")
    r = cast.api.client.post(
        f"/api/v1/reviews/{p['id']}",
        headers=cast.bob,
        json={"technical_merit": 5, "feasibility": 5, "compute_justification": 5},
    )
    assert cast.error(r) == (403, "conflict_of_interest")
    assert cast.get(cast.bob, "/reviews") == []


@pytest.mark.parametrize("hours", [100_001, 150_000, 0, -5])
def test_hours_outside_1_to_100000_are_refused_with_a_code(cast: Cast, hours: int) -> None:
    r = cast.api.client.post(
        "/api/v1/proposals",
        headers=cast.alice,
        json={**_body(cast), "card_hours": hours},
    )
    assert cast.error(r) == (422, "hours_out_of_range")
    assert "1 to 100,000" in r.json()["error"]["message"]
    p = cast.draft()
    r = cast.api.client.patch(
        f"/api/v1/proposals/{p['id']}", headers=cast.alice, json={"card_hours": hours}
    )
    assert cast.error(r) == (422, "hours_out_of_range")


def test_approving_more_than_asked_or_other_models_is_refused(cast: Cast) -> None:
    p = cast.reviewed(card_hours=1_000, gpu_models=["H100", "A800"])
    path = f"/api/v1/admin/proposals/{p['id']}/decision"
    r = cast.api.client.post(
        path, headers=cast.admin, json={"decision": "approve", "card_hours": 1_001}
    )
    assert cast.error(r) == (422, "hours_out_of_range")
    r = cast.api.client.post(
        path, headers=cast.admin, json={"decision": "approve", "gpu_models": ["L40S"]}
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_input"
    r = cast.api.client.post(path, headers=cast.admin, json={"decision": "reject"})
    assert cast.error(r) == (422, "invalid_input")  # a rejection needs a reason
    r = cast.api.client.post(path, headers=cast.admin, json={"decision": "maybe"})
    assert cast.error(r) == (422, "invalid_input")
    done = cast.post(
        cast.admin, path.removeprefix("/api/v1"), {"decision": "approve", "gpu_models": ["A800"]}
    )
    assert (done["grant"]["card_hours"], done["grant"]["gpu_models"]) == (1_000, ["A800"])


def test_submitted_proposals_cannot_be_edited_until_withdrawn(cast: Cast) -> None:
    p = cast.reviewed()
    pid = p["id"]
    c = cast.api.client
    r = c.patch(f"/api/v1/proposals/{pid}", headers=cast.alice, json={"title": "Changed"})
    assert cast.error(r) == (409, "not_editable")
    assert "withdraw" in r.json()["error"]["message"]
    r = c.put(
        f"/api/v1/proposals/{pid}/document",
        headers={**cast.alice, "Content-Type": "application/pdf"},
        content=PDF,
    )
    assert cast.error(r) == (409, "not_editable")
    assert cast.post(cast.alice, f"/proposals/{pid}/withdraw", {"reason": "typo"})["status"] == (
        "withdrawn"
    )
    r = c.patch(f"/api/v1/proposals/{pid}", headers=cast.bob, json={"title": "Changed"})
    assert r.status_code == 200 and r.json()["title"] == "Changed"
    again = cast.post(cast.alice, f"/proposals/{pid}/submit")
    assert (again["status"], again["round"], again["reviews_count"]) == ("submitted", 2, 0)
    r = c.post(
        f"/api/v1/admin/proposals/{pid}/decision", headers=cast.admin, json={"decision": "approve"}
    )
    assert cast.error(r) == (409, "not_enough_reviews")  # round 1's scores do not count
    r = c.post(f"/api/v1/proposals/{pid}/submit", headers=cast.alice)
    assert cast.error(r) == (409, "invalid_transition")


def test_pdf_must_be_a_small_pdf(cast: Cast) -> None:
    p = cast.draft()
    path = f"/api/v1/proposals/{p['id']}/document"
    c = cast.api.client
    pdf = {**cast.alice, "Content-Type": "application/pdf"}
    r = c.put(path, headers=pdf, content=b"MZ\x90\x00 not a pdf")
    assert cast.error(r) == (400, "invalid_document")
    r = c.put(path, headers={**cast.alice, "Content-Type": "text/plain"}, content=PDF)
    assert cast.error(r) == (400, "invalid_document")
    r = c.put(path, headers=pdf, content=PDF + b"0" * MAX_DOCUMENT_BYTES)
    assert cast.error(r) == (413, "document_too_large")
    assert cast.get(cast.alice, f"/proposals/{p['id']}")["document"] is None
    assert c.put(path, headers=pdf, content=PDF).status_code == 200
    stored = cast.api.platform.settings.data_dir / "proposals" / f"{p['id']}.pdf"
    assert stored.read_bytes() == PDF
    got = c.get(path, headers=cast.bob)
    assert got.status_code == 200 and got.content == PDF
    assert got.headers["content-type"] == "application/pdf"
    assert cast.error(c.get(path, headers=cast.stranger)) == (404, "not_found")
    assert cast.error(
        c.put(path, headers={**cast.stranger, "Content-Type": "application/pdf"}, content=PDF)
    ) == (404, "not_found")


def test_another_user_cannot_see_or_touch_a_proposal(cast: Cast) -> None:
    p = cast.draft()
    pid = p["id"]
    c = cast.api.client
    s = cast.stranger
    assert cast.error(c.get(f"/api/v1/proposals/{pid}", headers=s)) == (404, "not_found")
    r = c.patch(f"/api/v1/proposals/{pid}", headers=s, json={"title": "mine now"})
    assert cast.error(r) == (404, "not_found")
    assert cast.error(c.post(f"/api/v1/proposals/{pid}/submit", headers=s)) == (404, "not_found")
    assert cast.error(c.post(f"/api/v1/proposals/{pid}/withdraw", headers=s)) == (
        404,
        "not_found",
    )
    assert cast.get(s, "/proposals") == []
    assert [x["id"] for x in cast.get(cast.bob, "/proposals")] == [pid]
    assert cast.get(cast.admin, f"/proposals/{pid}")["id"] == pid
    assert c.get(f"/api/v1/proposals/{pid}").status_code == 401


def test_unknown_members_and_models_are_refused(cast: Cast) -> None:
    c = cast.api.client
    r = c.post(
        "/api/v1/proposals",
        headers=cast.alice,
        json={**_body(cast), "members": ["nobody@example.com"]},
    )
    assert cast.error(r) == (422, "invalid_input") and "nobody@example.com" in r.text
    r = c.post("/api/v1/proposals", headers=cast.alice, json={**_body(cast), "gpu_models": ["X"]})
    assert cast.error(r) == (422, "invalid_input")
    r = c.post(
        "/api/v1/proposals",
        headers=cast.alice,
        json={**_body(cast), "period_end": "2026-01-15T00:00:00Z"},
    )
    assert cast.error(r) == (422, "invalid_input")


def test_every_transition_notifies_the_team(cast: Cast) -> None:
    p = cast.reviewed()
    pid = p["id"]
    assert [n["subject"] for n in cast.get(cast.r1, "/notifications")][0].startswith(
        "[cardhour] please review"
    )
    cast.post(
        cast.admin,
        f"/admin/proposals/{pid}/decision",
        {"decision": "request_changes", "reason": "justify the H100s"},
    )
    cast.post(cast.alice, f"/proposals/{pid}/submit")
    cast.score(cast.r1, pid)
    cast.score(cast.r2, pid)
    cast.post(
        cast.admin, f"/admin/proposals/{pid}/decision", {"decision": "reject", "reason": "budget"}
    )
    for who in (cast.alice, cast.bob):
        subjects = [n["subject"] for n in cast.get(who, "/notifications")]
        assert len(subjects) == 4
        assert [s.rsplit("' ", 1)[1] for s in reversed(subjects)] == [
            "was submitted for review",
            "needs changes",
            "was submitted for review",
            "was rejected",
        ]
        latest = cast.get(who, "/notifications")[0]
        assert "budget" in latest["body"] and latest["sent_at"] is None
    assert cast.get(cast.stranger, "/notifications") == []
    events = cast.get(cast.alice, f"/proposals/{pid}")["events"]
    assert [(e["from_status"], e["to_status"]) for e in events] == [
        (None, "draft"),
        ("draft", "submitted"),
        ("submitted", "changes_requested"),
        ("changes_requested", "submitted"),
        ("submitted", "rejected"),
    ]


def test_admin_sets_roles(cast: Cast) -> None:
    c = cast.api.client
    r = c.post(
        "/api/v1/admin/users/role",
        headers=cast.admin,
        json={"email": cast.emails["bob"], "role": "wizard"},
    )
    assert cast.error(r) == (422, "invalid_input")
    admin_email = cast.get(cast.admin, "/auth/me")["email"]
    r = c.post(
        "/api/v1/admin/users/role", headers=cast.admin, json={"email": admin_email, "role": "user"}
    )
    assert cast.error(r) == (409, "conflict")
    done = cast.post(cast.admin, "/admin/users/role", {"email": cast.emails["r1"], "role": "user"})
    assert done["role"] == "user"
    assert cast.error(c.get("/api/v1/reviews", headers=cast.r1)) == (403, "forbidden")
    assert accounts.ROLES == ("user", "reviewer", "admin")


def _body(cast: Cast) -> dict[str, object]:
    return {
        "title": "T",
        "abstract": "A",
        "institution": "I",
        "card_hours": 10,
        "gpu_models": ["H100"],
        "period_start": "2026-02-01T00:00:00Z",
        "period_end": "2026-03-01T00:00:00Z",
        "justification": "J",
    }
