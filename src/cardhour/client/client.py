"""`CardhourClient`: the typed httpx SDK for /api/v1.

Every method returns the pydantic models of `cardhour.api.schemas` and raises `ApiError` for
anything that is not a success: the server's `{"error": {"code", "message", "details"}}` body,
a response that is not what the API sends (`bad_response`), or no connection (`unreachable`).

Methods that create something or move money take `idempotency_key` (sent as `Idempotency-Key`):
the server acts once per key, so such a request is retried after a network error (at most
`connection.KEY_RETRIES` more times) instead of failing; without a key nothing is ever retried.

Here: accounts, the catalogue, instances, operators' calls and statements; the marketplace's
calls are in marketplace.py, the sponsorship proposals' in grants.py, the HTTP plumbing (errors,
retries) in connection.py.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from cardhour.api.schemas import (
    AuthEventRead,
    AuthRead,
    BalanceRead,
    CreditCreate,
    CreditCreated,
    DefragRead,
    HealthRead,
    ImageRead,
    InstanceCreate,
    InstanceRead,
    InstanceStart,
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
    StartChoicesRead,
    TopUpCreate,
    TopUpRead,
    UserRead,
)
from cardhour.api.schemas.statements import StatementRead
from cardhour.client.connection import ApiError, bad_response, error_from
from cardhour.client.grants import ProposalCalls
from cardhour.client.hosts import HostCalls
from cardhour.client.marketplace import MarketplaceCalls
from cardhour.client.storage import VolumeCalls


class CardhourClient(MarketplaceCalls, ProposalCalls, HostCalls, VolumeCalls):
    """A connection to one cardhour server. Use as a context manager, or call `close()`.

    `url` is the server root (`http://host:port`); `api_key` is sent as a bearer token when set.
    `transport` replaces the network (tests pass an `httpx.MockTransport`). The marketplace's
    calls come from `MarketplaceCalls`, the sponsorship proposals' from `ProposalCalls`, the
    connection itself from `Connection`.
    """

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

    def start(
        self, ident: str, idempotency_key: str | None = None, mode: str | None = None
    ) -> InstanceRead:
        """`mode` (`auto`, `wait`, `no_gpu`, `move`): how an instance whose stop kept its disk
        starts when its host's GPUs are taken (`ApiError` `start_choice_needed` otherwise)."""
        body = None if mode is None else InstanceStart.model_validate({"mode": mode}).model_dump()
        path = _instance_path(ident, "/start")
        return self._call(InstanceRead, "POST", path, idempotency_key, json=body)

    def start_choices(self, ident: str) -> StartChoicesRead:
        return self._call(StartChoicesRead, "GET", _instance_path(ident, "/start-choices"))

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

    def admin_set_role(self, email: str, role: str) -> UserRead:
        body = RoleSet(email=email, role=role)
        return self._call(UserRead, "POST", "/admin/users/role", json=body.model_dump())

    def auth_events(self, limit: int = 100) -> list[AuthEventRead]:
        """The latest sign-in throttle locks (admin role)."""
        return self._call(list[AuthEventRead], "GET", "/admin/auth-events", params={"limit": limit})

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
            raise error_from(response)
        if not response.headers.get("content-type", "").startswith("text/csv"):
            raise bad_response(response)
        return response.text


def _statement_path(month: str) -> str:
    return f"/statements/{quote(month, safe='')}"


def _instance_path(ident: str, suffix: str = "") -> str:
    return f"/instances/{quote(ident, safe='')}{suffix}"
