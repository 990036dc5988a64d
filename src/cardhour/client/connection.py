"""The HTTP plumbing under `CardhourClient`: one connection to /api/v1, its errors and retries.

Contracts: a call returns the response body validated as the requested pydantic type, or raises
`ApiError` — the server's `{"error": {"code", "message", "details"}}` body, a response that is
not what the API sends (`bad_response`, `http_error`), or no connection (`unreachable`). A call
with an idempotency key (sent as `Idempotency-Key`) is retried after a network error, at most
`KEY_RETRIES` more times, `RETRY_PAUSE_SECONDS` × the attempt number apart; without a key
nothing is ever retried.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Self, TypeVar

import httpx
from pydantic import TypeAdapter, ValidationError

from cardhour.api.schemas import ErrorRead

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


class Connection:
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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(
        self,
        model: type[T],
        method: str,
        path: str,
        idempotency_key: str | None = None,
        **kwargs: Any,
    ) -> T:
        response = self._request(method, path, idempotency_key, **kwargs)
        try:
            return TypeAdapter(model).validate_json(response.content)
        except ValidationError as exc:
            raise bad_response(response) from exc

    def _bytes(self, method: str, path: str, **kwargs: Any) -> bytes:
        """A call whose answer is not JSON: its body."""
        return self._request(method, path, None, **kwargs).content

    def _request(
        self, method: str, path: str, idempotency_key: str | None, **kwargs: Any
    ) -> httpx.Response:
        """The response of a call that succeeded (module docstring: retries, errors)."""
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
            raise error_from(response)
        return response


def error_from(response: httpx.Response) -> ApiError:
    """The server's error body as an ApiError; anything else says what came back instead."""
    try:
        body = ErrorRead.model_validate_json(response.content).error
    except ValidationError:
        return bad_response(response, code="http_error")
    return ApiError(response.status_code, body.code, body.message, body.details)


def bad_response(response: httpx.Response, code: str = "bad_response") -> ApiError:
    """An ApiError saying what came back instead of the API's answer (its status and type)."""
    what = response.headers.get("content-type", "no content type")
    message = (
        f"unexpected HTTP {response.status_code} response ({what}) from {response.request.url}; "
        "is this a cardhour server?"
    )
    return ApiError(response.status_code, code, message)
