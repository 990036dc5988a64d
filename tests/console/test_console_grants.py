"""The sponsorship programme's console pages without a browser (both databases): the applicant's
draft form (PDF, bad input), submit and withdraw, the proposal page with its history and, once
approved, the grant's usage; notifications; reviewers' assignments, conflicts and scores; admins'
list, assignment, decisions, roles and the grants dashboard; and every role refusal shown in the
page with its HTTP status."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from cardhour.api.app import create_app
from cardhour.platform import Platform

PDF = b"%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')


@dataclass
class User:
    client: TestClient
    email: str
    csrf: str

    def get(self, path: str, status: int = 200) -> str:
        r = self.client.get(path)
        assert r.status_code == status, (path, r.status_code, r.text[-2000:])
        return r.text

    def post(self, path: str, status: int = 200, files: object = None, **form: object) -> str:
        r = self.client.post(path, data={**form, "csrf": self.csrf}, files=files)  # type: ignore[arg-type]
        assert r.status_code == status, (path, r.status_code, r.text[-2000:])
        return r.text


def _signin(client: TestClient, email: str, password: str, signup: bool) -> User:
    path = "/signup" if signup else "/signin"
    r = client.post(path, data={"email": email, "password": password})
    assert r.status_code == 200 and r.url.path == "/gpus", r.text
    match = CSRF.search(r.text)
    assert match
    return User(client, email, match.group(1))


@dataclass
class Cast:
    admin: User
    alice: User  # creates the proposals
    bob: User  # on alice's team
    r1: User
    r2: User
    r3: User
    stranger: User


@pytest.fixture
def cast(platform: Platform) -> Iterator[Cast]:
    app = create_app(platform)
    email, password = platform.bootstrap_admin()
    clients = [TestClient(app) for _ in range(7)]
    try:
        admin = _signin(clients[0], email, password, signup=False)
        names = ("alice", "bob", "r1", "r2", "r3", "stranger")
        users = {
            n: _signin(c, f"{n}@example.com", "password123", signup=True)
            for n, c in zip(names, clients[1:], strict=True)
        }
        for n in ("r1", "r2", "r3"):
            done = admin.post("/admin/users/role", email=f"{n}@example.com", role="reviewer")
            assert f"{n}@example.com now has the role reviewer" in done
        yield Cast(admin=admin, **users)
    finally:
        for c in clients:
            c.close()


def _form(**changes: object) -> dict[str, object]:
    return {
        "title": "Protein folding at scale",
        "abstract": "We fold proteins.",
        "institution": "University of Somewhere",
        "members": "bob@example.com",
        "card_hours": "80000",
        "gpu_models": ["H100"],
        "period_start": "2026-02-01",
        "period_end": "2026-08-01",
        "justification": "Each fold takes 8 H100s for a week.",
        **changes,
    }


def _create(user: User, **changes: object) -> str:
    r = user.client.post(
        "/grants/new",
        data={**_form(**changes), "csrf": user.csrf},
        files={"document": ("proposal.pdf", PDF, "application/pdf")},
    )
    assert r.status_code == 200 and re.fullmatch(r"/grants/[0-9a-f]+", r.url.path), r.text
    return r.url.path.rsplit("/", 1)[1]


def _error(page: str) -> str:
    match = re.search(r'<div class="error" role="alert">(.*?)</div>', page, re.S)
    assert match, page[-2000:]
    return html.unescape(match.group(1))


def test_signed_out_visitors_are_sent_to_sign_in(platform: Platform) -> None:
    with TestClient(create_app(platform)) as anon:
        pages = ("/grants", "/grants/new", "/grants/x", "/grants/x/edit", "/notifications")
        for path in (*pages, "/reviews", "/admin/proposals", "/admin/grants"):
            assert anon.get(path).url.path == "/signin", path
        for path in ("/grants/new", "/grants/x/submit", "/reviews/x/score", "/admin/users/role"):
            assert anon.post(path, data={}).url.path == "/signin", path


def test_applicant_drafts_edits_submits_and_withdraws(cast: Cast) -> None:
    alice = cast.alice
    listing = alice.get("/grants")
    assert '<a href="/grants">Grants</a>' in listing and 'data-testid="no-proposals"' in listing
    form = alice.get("/grants/new")
    assert 'name="gpu_models" value="H100"' in form and 'enctype="multipart/form-data"' in form

    too_many = alice.post("/grants/new", 422, **_form(card_hours="100001"))
    assert _error(too_many) == "card_hours must be 1 to 100,000; got 100,001"
    assert 'value="Protein folding at scale"' in too_many  # the form keeps what was typed
    for changes, message in (
        ({"card_hours": "lots"}, "card-hours must be a whole number"),
        ({"card_hours": "0"}, "card_hours must be 1 to 100,000; got 0"),
        ({"members": "nobody@example.com"}, "no account for nobody@example.com"),
        ({"period_end": "2026-01-15"}, "period_end must be after period_start"),
        ({"period_end": "soon"}, "period_end must be a date (YYYY-MM-DD)"),
        ({"gpu_models": []}, "ask for at least one GPU model"),
        ({"title": "  "}, "title must not be empty"),
    ):
        assert message in _error(alice.post("/grants/new", 422, **_form(**changes))), changes
    not_pdf = alice.post(
        "/grants/new", 400, files={"document": ("x.pdf", b"hello", "application/pdf")}, **_form()
    )
    assert "not a PDF" in _error(not_pdf)
    huge = PDF + b"0" * (5 * 1024 * 1024)
    too_big = alice.post(
        "/grants/new", 413, files={"document": ("x.pdf", huge, "application/pdf")}, **_form()
    )
    assert "larger than 5 MiB" in _error(too_big)
    forged = alice.client.post("/grants/new", data={**_form(), "csrf": "nope"})
    assert forged.status_code == 403 and "form expired" in forged.text
    assert 'data-testid="no-proposals"' in alice.get("/grants")  # nothing was saved

    pid = _create(alice)
    page = alice.get(f"/grants/{pid}")
    assert 'data-testid="proposal-state">draft<' in page
    assert 'data-testid="members">alice@example.com, bob@example.com<' in page
    assert f'href="/grants/{pid}/document"' in page and "create" in page
    pdf = alice.client.get(f"/grants/{pid}/document")
    assert pdf.status_code == 200 and pdf.content == PDF
    assert pdf.headers["content-type"] == "application/pdf"
    assert f'data-id="{pid}"' in cast.bob.get("/grants")  # the team sees it

    edit = alice.get(f"/grants/{pid}/edit")
    assert 'value="80000"' in edit and ">bob@example.com</textarea>" in edit
    alice.post(f"/grants/{pid}/edit", **_form(card_hours="60,000", title="Folding, revised"))
    page = alice.get(f"/grants/{pid}")
    assert 'data-testid="hours-asked">60,000<' in page and "Folding, revised" in page

    page = alice.post(f"/grants/{pid}/submit")
    assert 'data-testid="proposal-state">submitted<' in page and "round 1" in page
    assert 'id="submit-proposal"' not in page and 'id="withdraw-proposal"' in page
    frozen = alice.get(f"/grants/{pid}/edit", 409)
    assert "a submitted proposal cannot be edited; withdraw it first" in _error(frozen)
    refused = alice.post(f"/grants/{pid}/edit", 409, **_form(card_hours="1"))
    assert "withdraw it first" in _error(refused)
    again = alice.post(f"/grants/{pid}/submit", 409)
    assert "cannot submit a proposal that is submitted" in _error(again)

    page = cast.bob.post(f"/grants/{pid}/withdraw", reason="more data first")
    assert 'data-testid="proposal-state">withdrawn<' in page and "more data first" in page
    page = alice.post(f"/grants/{pid}/submit")
    assert 'data-testid="proposal-state">submitted<' in page and "round 2" in page
    history = re.findall(r"<td>(create|submit|withdraw)</td>", page)
    assert history == ["create", "submit", "withdraw", "submit"]

    notes = cast.bob.get("/notifications")
    assert notes.count('data-testid="notification"') == 3  # submit, withdraw, submit
    assert "was withdrawn" in notes and "Reason: more data first" in notes
    assert 'data-testid="no-notifications"' in cast.stranger.get("/notifications")

    # someone not on the team sees nothing, as if it did not exist
    for path in (f"/grants/{pid}", f"/grants/{pid}/edit", f"/grants/{pid}/document"):
        assert f"no proposal {pid!r}" in _error(cast.stranger.get(path, 404))
    assert "no proposal" in _error(cast.stranger.post(f"/grants/{pid}/withdraw", 404))
    assert "no proposal" in _error(cast.stranger.post(f"/grants/{pid}/edit", 404, **_form()))
    assert f'data-id="{pid}"' not in cast.stranger.get("/grants")
    assert "no proposal" in _error(alice.get("/grants/nope", 404))


def test_review_and_decision_through_the_console(cast: Cast) -> None:
    alice, admin, r1, r2, r3 = cast.alice, cast.admin, cast.r1, cast.r2, cast.r3
    pid = _create(alice)
    alice.post(f"/grants/{pid}/submit")

    # role refusals, in the page with their status
    for who in (alice, r1):
        assert "needs the admin role" in _error(who.get("/admin/proposals", 403))
        assert "needs the admin role" in _error(who.get("/admin/grants", 403))
        assert "needs the admin role" in _error(who.post(f"/admin/proposals/{pid}/decision", 403))
        assert "needs the admin role" in _error(
            who.post(f"/admin/proposals/{pid}/reviewers", 403, reviewers="r1@example.com")
        )
        assert "needs the admin role" in _error(
            who.post("/admin/users/role", 403, email="bob@example.com", role="admin")
        )
    assert "needs the reviewer role" in _error(alice.get("/reviews", 403))
    assert "needs the reviewer role" in _error(alice.post(f"/reviews/{pid}/score", 403))
    assert "needs the reviewer role" in _error(
        cast.stranger.post(f"/reviews/{pid}/conflict", 403, reason="x")
    )
    assert f"no proposal {pid!r}" in _error(r1.get(f"/grants/{pid}", 404))  # not yet assigned
    assert "unknown role 'wizard'" in _error(
        admin.post("/admin/users/role", 422, email="bob@example.com", role="wizard")
    )

    listing = admin.get("/admin/proposals")
    assert f'data-id="{pid}"' in listing and f'data-testid="reviews-{pid}">0<' in listing
    assert f'data-id="{pid}"' in admin.get("/admin/proposals?status=submitted")
    assert f'data-id="{pid}"' not in admin.get("/admin/proposals?status=approved")
    assert "unknown status 'bogus'" in _error(admin.get("/admin/proposals?status=bogus", 422))

    no_role = admin.post(f"/admin/proposals/{pid}/reviewers", 422, reviewers="bob@example.com")
    assert "bob@example.com does not have the reviewer role" in _error(no_role)
    page = admin.post(
        f"/admin/proposals/{pid}/reviewers", reviewers="r1@example.com, r2@example.com"
    )
    assert 'data-testid="reviewers"' in page and "r2@example.com" in page
    early = admin.post(f"/admin/proposals/{pid}/decision", 409, decision="approve")
    assert "a decision needs 2 reviews; this round has 0" in _error(early)

    assert f'data-id="{pid}"' in r1.get("/reviews") and "to score" in r1.get("/reviews")
    page = r1.get(f"/grants/{pid}")
    assert 'id="score-form"' in page and 'data-testid="admin-panel"' not in page
    scores = {"technical_merit": "5", "feasibility": "4", "compute_justification": "4"}
    bad = r1.post(f"/reviews/{pid}/score", 422, **{**scores, "feasibility": "6"})
    assert "feasibility must be 1 to 5; got 6" in _error(bad)
    page = r1.post(f"/reviews/{pid}/score", **scores, comments="sound plan")
    assert 'data-testid="my-scores"' in page and "Feasibility 4" in page
    assert 'data-testid="reviews-count">1<' in alice.get(f"/grants/{pid}")
    assert "sound plan" not in alice.get(f"/grants/{pid}")  # the team sees the count only

    page = r2.post(f"/reviews/{pid}/conflict", reason="co-author in 2025")
    assert 'data-testid="conflict-declared"' in page and 'id="score-form"' not in page
    conflicted = r2.post(f"/reviews/{pid}/score", 403, **scores)
    assert "you declared a conflict of interest" in _error(conflicted)
    assert "conflict declared" in r2.get("/reviews")
    assert "co-author in 2025" in admin.get(f"/grants/{pid}")

    admin.post(f"/admin/proposals/{pid}/reviewers", reviewers="r3@example.com")
    r3.post(f"/reviews/{pid}/score", **{**scores, "technical_merit": "3"}, comments="ok")
    page = admin.get(f"/grants/{pid}")
    assert 'data-testid="reviews"' in page and "sound plan" in page and 'id="decision-form"' in page

    decide = f"/admin/proposals/{pid}/decision"
    approve = {"decision": "approve", "gpu_models": ["H100"]}
    over = admin.post(decide, 422, **approve, card_hours="90000")
    assert "card_hours must be 1 to 80,000; got 90,000" in _error(over)
    assert 'value="90000"' in over  # the decision form keeps what was typed
    extra = admin.post(decide, 422, decision="approve", card_hours="100", gpu_models=["RTX4090"])
    assert "GPU models not requested by the proposal: RTX4090" in _error(extra)
    none = admin.post(decide, 422, decision="approve", card_hours="100")
    assert "approve at least one GPU model" in _error(none)
    reasonless = admin.post(decide, 422, decision="reject")
    assert "reason must not be empty" in _error(reasonless)
    assert "unknown decision 'maybe'" in _error(admin.post(decide, 422, decision="maybe"))

    page = admin.post(decide, **approve, card_hours="50000")
    assert 'data-testid="proposal-state">approved<' in page
    assert 'data-testid="granted">50000.000<' in page and 'id="decision-form"' not in page
    assert "cannot reject a proposal that is approved" in _error(
        admin.post(decide, 409, decision="reject", reason="changed my mind")
    )

    mine = alice.get(f"/grants/{pid}")
    assert 'data-testid="hours-granted">50,000 on H100<' in mine
    for figure in ('"granted">50000.000<', '"used">0.000<', '"remaining"><strong>50000.000<'):
        assert f"data-testid={figure}" in mine, figure
    assert 'data-testid="burn-rate">0.000<' in mine and 'data-testid="expired">0.000<' in mine
    assert 'id="score-form"' not in r1.get(f"/grants/{pid}")  # scoring is over
    notes = alice.get("/notifications")
    assert (
        "was approved" in notes and "Granted 50,000 card-hours on H100 (requested 80,000)" in notes
    )
    assert "please review proposal" in r1.get("/notifications")

    board = admin.get("/admin/grants")
    assert 'data-testid="total-granted">50000.000<' in board
    assert 'data-testid="total-remaining"><strong>50000.000<' in board
    assert f'data-grant="proposal-{pid}"' in board and f'href="/grants/{pid}"' in board


def test_changes_requested_goes_back_to_the_team(cast: Cast) -> None:
    alice, admin = cast.alice, cast.admin
    pid = _create(alice, title="Climate ensembles")
    alice.post(f"/grants/{pid}/submit")
    admin.post(f"/admin/proposals/{pid}/reviewers", reviewers="r1@example.com r2@example.com")
    scores = {"technical_merit": "2", "feasibility": "3", "compute_justification": "2"}
    cast.r1.post(f"/reviews/{pid}/score", **scores)
    cast.r2.post(f"/reviews/{pid}/score", **scores)
    page = admin.post(
        f"/admin/proposals/{pid}/decision", decision="request_changes", reason="show scaling"
    )
    assert 'data-testid="proposal-state">changes requested<' in page

    page = alice.get(f"/grants/{pid}")
    assert 'data-testid="decision-reason"' in page and "show scaling" in page
    assert 'data-testid="edit"' in page and 'id="submit-proposal"' in page
    assert "needs changes" in alice.get("/notifications")
    alice.post(f"/grants/{pid}/edit", **_form(title="Climate ensembles v2", card_hours="20000"))
    page = alice.post(f"/grants/{pid}/submit")
    assert "round 2" in page and 'data-testid="reviews-count">0<' in page
