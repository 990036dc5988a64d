"""`CardhourClient`: the typed httpx SDK for /api/v1.

Every method returns the pydantic models of `cardhour.api.schemas` and raises `ApiError` for
anything that is not a success: the server's `{"error": {"code", "message", "details"}}` body,
a response that is not what the API sends (`bad_response`), or no connection (`unreachable`).

Methods that create something or move money take `idempotency_key` (sent as `Idempotency-Key`):
the server acts once per key, so such a request is retried after a network error (at most
`KEY_RETRIES` more times) instead of failing; without a key nothing is ever retried.
"""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter, ValidationError

from cardhour.api.schemas import (
    AuthRead,
    BalanceRead,
    CreditCreate,
    CreditCreated,
    DefragRead,
    ErrorRead,
    HealthRead,
    ImageRead,
    InstanceCreate,
    InstanceRead,
    NodeRead,
    OfferRead,
    PriceRead,
    PriceSet,
    QuoteCreate,
    QuoteCreated,
    RoleSet,
    SlurmFilesRead,
    SshKeyCreate,
    SshKeyRead,
    TopUpCreate,
    TopUpRead,
    UserRead,
)
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
from cardhour.api.schemas.marketplace import (
    AppDecision,
    AppPublish,
    AppRead,
    AppRollback,
    EarningsRead,
    InvokeRead,
    PayoutCreate,
    PayoutRead,
)
from cardhour.api.schemas.statements import StatementRead

DEFAULT_URL = "http://127.0.0.1:8000"
IDEMPOTENCY_HEADER = "Idempotency-Key"
KEY_RETRIES = 2  # more attempts after a network error, for requests with an idempotency key
RETRY_PAUSE_SECONDS = 0.5  # times the attempt number
T = TypeVar("T")


def new_idempotency_key() -> str:
    """A fresh random key: one per user action (not per HTTP attempt)."""
    return str(uuid.uuid4())


class ApiError(Exception):
    """A failed call. `status` is the HTTP status, or 0 when no response arrived.

    `code` is the server's stable error code (`not_found`, `insufficient_balance`, ...), or one
    of the client's own: `unreachable`, `invalid_url`, `bad_response`, `http_error`.
    """

    def __init__(
        self, status: int, code: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}


class CardhourClient:
    """A connection to one cardhour server. Use as a context manager, or call `close()`.

    `url` is the server root (`http://host:port`); `api_key` is sent as a bearer token when set.
    `transport` replaces the network (tests pass an `httpx.MockTransport`).
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        api_key: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        if api_key is not None and not (api_key.isascii() and api_key.isprintable()):
            raise ApiError(0, "invalid_api_key", "an API key is printable ASCII (it starts ch_)")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        try:
            self._http = httpx.Client(
                base_url=f"{self.url}/api/v1", headers=headers, timeout=timeout, transport=transport
            )
        except httpx.InvalidURL as exc:
            raise ApiError(0, "invalid_url", f"bad server URL {url!r}: {exc}") from exc

    def __enter__(self) -> CardhourClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- accounts ---------------------------------------------------------------------------

    def signup(self, email: str, password: str) -> AuthRead:
        """Create an account (it gets the trial credit) and return its first API key."""
        body = {"email": email, "password": password}
        return self._call(AuthRead, "POST", "/auth/signup", json=body)

    def login(self, email: str, password: str, key_name: str = "cli") -> AuthRead:
        """Check the password and return a new API key named `key_name`."""
        body = {"email": email, "password": password, "key_name": key_name}
        return self._call(AuthRead, "POST", "/auth/login", json=body)

    def me(self) -> UserRead:
        return self._call(UserRead, "GET", "/auth/me")

    def balance(self) -> BalanceRead:
        return self._call(BalanceRead, "GET", "/balance")

    def quote(self, gpu: str, count: int = 1, plan: str = "on_demand") -> QuoteCreated:
        """A price promised for a while (see `valid_until`); launch with `quote_id`."""
        body = QuoteCreate(gpu=gpu, count=count, plan=plan)
        return self._call(QuoteCreated, "POST", "/quotes", json=body.model_dump())

    def prices(self) -> list[PriceRead]:
        """The price book: in force now, and scheduled changes."""
        return self._call(list[PriceRead], "GET", "/prices")

    def admin_set_price(self, body: PriceSet) -> list[PriceRead]:
        return self._call(
            list[PriceRead], "POST", "/admin/prices", json=body.model_dump(mode="json")
        )

    def admin_grant_credit(
        self, body: CreditCreate, idempotency_key: str | None = None
    ) -> CreditCreated:
        return self._call(
            CreditCreated,
            "POST",
            "/admin/credits",
            idempotency_key,
            json=body.model_dump(mode="json"),
        )

    # -- catalogue --------------------------------------------------------------------------

    def offers(
        self, gpu: str | None = None, count: int | None = None, weights: str | None = None
    ) -> list[OfferRead]:
        """Live offers; `gpu` is a model or `MODEL:COUNT`, a count adds a recommendation,
        `weights` says per offer whether those model weights are cached there."""
        wanted = {"gpu": gpu, "count": count, "weights": weights}
        params = {k: v for k, v in wanted.items() if v is not None}
        return self._call(list[OfferRead], "GET", "/offers", params=params)

    # -- instances --------------------------------------------------------------------------

    def create_instance(
        self,
        body: InstanceCreate | None = None,
        /,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> InstanceRead:
        """Launch. Pass an `InstanceCreate`, or its fields as keywords (`gpu="H100", count=1`).

        The instance comes back `pending`; the server's reconcilers bring it up. With
        `idempotency_key`, the same key again returns the first launch instead of a second one.
        """
        if body is None:
            body = InstanceCreate(**fields)
        elif fields:
            raise TypeError("pass an InstanceCreate or keyword fields, not both")
        return self._call(
            InstanceRead, "POST", "/instances", idempotency_key, json=body.model_dump()
        )

    def list_instances(self, all: bool = False) -> list[InstanceRead]:
        """Instances of this account; terminated ones only with `all=True`."""
        params = {"all": "true"} if all else {}
        return self._call(list[InstanceRead], "GET", "/instances", params=params)

    def get_instance(self, ident: str) -> InstanceRead:
        """One instance by id or name, with its events."""
        return self._call(InstanceRead, "GET", _instance_path(ident))

    def stop(self, ident: str, idempotency_key: str | None = None) -> InstanceRead:
        return self._call(InstanceRead, "POST", _instance_path(ident, "/stop"), idempotency_key)

    def start(self, ident: str, idempotency_key: str | None = None) -> InstanceRead:
        return self._call(InstanceRead, "POST", _instance_path(ident, "/start"), idempotency_key)

    def terminate(self, ident: str) -> InstanceRead:
        return self._call(InstanceRead, "DELETE", _instance_path(ident))

    def add_ssh_key(self, public_key: str, name: str | None = None) -> SshKeyRead:
        body = SshKeyCreate(public_key=public_key, name=name)
        return self._call(SshKeyRead, "POST", "/ssh-keys", json=body.model_dump())

    def ssh_keys(self) -> list[SshKeyRead]:
        return self._call(list[SshKeyRead], "GET", "/ssh-keys")

    def remove_ssh_key(self, ident: str) -> SshKeyRead:
        """By id, name or fingerprint."""
        return self._call(SshKeyRead, "DELETE", f"/ssh-keys/{quote(ident, safe='')}")

    def slurm_files(self, ident: str) -> SlurmFilesRead:
        """One-click Slurm: `slurm.conf`, `gres.conf`, `topology.conf` for a running cluster."""
        return self._call(SlurmFilesRead, "GET", _instance_path(ident, "/slurm"))

    def images(self) -> list[ImageRead]:
        return self._call(list[ImageRead], "GET", "/images")

    # -- the app marketplace -----------------------------------------------------------------

    def apps(self, category: str | None = None) -> list[AppRead]:
        params = {"category": category} if category else None
        return self._call(list[AppRead], "GET", "/apps", params=params)

    def my_apps(self) -> list[AppRead]:
        return self._call(list[AppRead], "GET", "/apps/mine")

    def app(self, slug: str) -> AppRead:
        return self._call(AppRead, "GET", _app_path(slug))

    def publish_app(self, manifest: str, code_zip: bytes) -> AppRead:
        """A new version of an app (the first creates it, in draft); `code_zip` as
        `core.apps.pack` makes it."""
        body = AppPublish(manifest=manifest, code_b64=base64.b64encode(code_zip).decode())
        return self._call(AppRead, "POST", "/apps", json=body.model_dump())

    def submit_app(self, slug: str) -> AppRead:
        return self._call(AppRead, "POST", _app_path(slug, "/submit"))

    def rollback_app(self, slug: str, version: int) -> AppRead:
        body = AppRollback(version=version).model_dump()
        return self._call(AppRead, "POST", _app_path(slug, "/rollback"), json=body)

    def invoke(self, slug: str, payload: dict[str, Any], call_id: str | None = None) -> InvokeRead:
        """One paid call; a `call_id` makes it idempotent (a repeat is refused with 409, never
        run or charged twice)."""
        headers = {"X-Call-Id": call_id} if call_id else None
        return self._call(
            InvokeRead, "POST", _app_path(slug, "/invoke"), json=payload, headers=headers
        )

    def earnings(self) -> EarningsRead:
        return self._call(EarningsRead, "GET", "/developer/earnings")

    def request_payout(
        self, amount: str | None = None, idempotency_key: str | None = None
    ) -> PayoutRead:
        """Retried with the same key (a new one when not given): asked for once."""
        body = PayoutCreate(amount=amount).model_dump()
        key = idempotency_key or new_idempotency_key()
        return self._call(PayoutRead, "POST", "/developer/payouts", key, json=body)

    def payouts(self) -> list[PayoutRead]:
        return self._call(list[PayoutRead], "GET", "/developer/payouts")

    def admin_decide_app(self, slug: str, action: str, reason: str | None = None) -> AppRead:
        """`approve`, `reject` (with a reason) or `delist`."""
        body = AppDecision(reason=reason).model_dump()
        path = f"/admin/apps/{quote(slug, safe='')}/{quote(action, safe='')}"
        return self._call(AppRead, "POST", path, json=body)

    def health(self) -> HealthRead:
        return self._call(HealthRead, "GET", "/health")

    # -- operators (admin role) -------------------------------------------------------------

    def admin_nodes(self) -> list[NodeRead]:
        """The fleet with live GPU allocations and drains."""
        return self._call(list[NodeRead], "GET", "/admin/nodes")

    def admin_resume_node(self, node_id: str) -> NodeRead:
        """Put a node the readiness gate drained back into scheduling."""
        return self._call(NodeRead, "POST", f"/admin/nodes/{quote(node_id, safe='')}/resume")

    def defrag_plan(self, gpu: str) -> DefragRead:
        """What the planner would move so `gpu` (`MODEL:COUNT`) fits; nothing is moved."""
        return self._call(DefragRead, "GET", "/admin/defrag", params={"gpu": gpu})

    def admin_top_up(
        self,
        email: str,
        amount: str,
        reference: str | None = None,
        idempotency_key: str | None = None,
    ) -> TopUpRead:
        """Credit `amount` (a decimal string) to the cash of the account `email`.

        The same `reference` is credited once; without one the server makes one up, so pass
        `idempotency_key` to make a retry safe.
        """
        body = TopUpCreate(email=email, amount=amount, reference=reference)
        return self._call(
            TopUpRead, "POST", "/admin/topups", idempotency_key, json=body.model_dump()
        )

    # -- statements -------------------------------------------------------------------------

    def statement(self, month: str) -> StatementRead:
        """The account's statement for `month` (YYYY-MM, UTC); the month in progress runs to now.
        A malformed month or one to come is `ApiError` 422 `invalid_input`."""
        return self._call(StatementRead, "GET", _statement_path(month))

    def statement_csv(self, month: str) -> str:
        """The same statement as CSV text (one header row, one row per figure)."""
        try:
            response = self._http.get(_statement_path(month), params={"format": "csv"})
        except httpx.TransportError as exc:
            reason = str(exc) or type(exc).__name__
            raise ApiError(0, "unreachable", f"cannot reach {self.url}: {reason}") from exc
        if response.is_error:
            raise _error_from(response)
        if not response.headers.get("content-type", "").startswith("text/csv"):
            raise _bad_response(response)
        return response.text

    # -- sponsorship proposals --------------------------------------------------------------

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

    def admin_set_role(self, email: str, role: str) -> UserRead:
        body = RoleSet(email=email, role=role)
        return self._call(UserRead, "POST", "/admin/users/role", json=body.model_dump())

    # -- plumbing ---------------------------------------------------------------------------

    def _call(
        self,
        model: type[T],
        method: str,
        path: str,
        idempotency_key: str | None = None,
        **kwargs: Any,
    ) -> T:
        attempts = 1
        if idempotency_key is not None:
            if not (idempotency_key.isascii() and idempotency_key.isprintable()):
                raise ApiError(0, "invalid_input", "an idempotency key is printable ASCII")
            kwargs["headers"] = {IDEMPOTENCY_HEADER: idempotency_key}
            attempts += KEY_RETRIES
        for attempt in range(1, attempts + 1):
            try:
                response = self._http.request(method, path, **kwargs)
                break
            except httpx.TransportError as exc:
                if attempt < attempts and not isinstance(exc, httpx.UnsupportedProtocol):
                    time.sleep(RETRY_PAUSE_SECONDS * attempt)
                    continue
                reason = str(exc) or type(exc).__name__
                raise ApiError(0, "unreachable", f"cannot reach {self.url}: {reason}") from exc
        if response.is_error:
            raise _error_from(response)
        try:
            return TypeAdapter(model).validate_json(response.content)
        except ValidationError as exc:
            raise _bad_response(response) from exc


def _statement_path(month: str) -> str:
    return f"/statements/{quote(month, safe='')}"


def _proposal_path(proposal_id: str, suffix: str = "") -> str:
    return f"/proposals/{quote(proposal_id, safe='')}{suffix}"


def _app_path(slug: str, suffix: str = "") -> str:
    return f"/apps/{quote(slug, safe='')}{suffix}"


def _instance_path(ident: str, suffix: str = "") -> str:
    return f"/instances/{quote(ident, safe='')}{suffix}"


def _error_from(response: httpx.Response) -> ApiError:
    """The server's error body as an ApiError; anything else says what came back instead."""
    try:
        body = ErrorRead.model_validate_json(response.content).error
    except ValidationError:
        return _bad_response(response, code="http_error")
    return ApiError(response.status_code, body.code, body.message, body.details)


def _bad_response(response: httpx.Response, code: str = "bad_response") -> ApiError:
    what = response.headers.get("content-type", "no content type")
    message = (
        f"unexpected HTTP {response.status_code} response ({what}) from {response.request.url}; "
        "is this a cardhour server?"
    )
    return ApiError(response.status_code, code, message)
