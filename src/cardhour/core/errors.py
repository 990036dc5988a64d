"""One exception tree with stable codes; the API maps them to HTTP, the CLI to exit code 2."""

from __future__ import annotations

from typing import Any


class CardhourError(Exception):
    """Base of every expected error. `code` is stable; `message` is for people."""

    code = "error"
    http_status = 400

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidInput(CardhourError):
    code = "invalid_input"
    http_status = 422


class NotFound(CardhourError):
    code = "not_found"
    http_status = 404


class Unauthorized(CardhourError):
    code = "unauthorized"
    http_status = 401


class Forbidden(CardhourError):
    code = "forbidden"
    http_status = 403


class Conflict(CardhourError):
    code = "conflict"
    http_status = 409


class InsufficientBalance(CardhourError):
    code = "insufficient_balance"
    http_status = 402


class NoCapacity(CardhourError):
    code = "no_capacity"
    http_status = 409


class TooManyAttempts(CardhourError):
    """Sign-in or sign-up refused while its account or client address is locked after too
    many failures (`details.retry_after`: seconds; the API sends it as `Retry-After`)."""

    code = "too_many_attempts"
    http_status = 429


class BodyTimeout(CardhourError):
    """The request's body stalled: no chunk of it arrived for too long."""

    code = "body_timeout"
    http_status = 408


class InvalidTransition(CardhourError):
    code = "invalid_transition"
    http_status = 409


class IdempotencyKeyReused(CardhourError):
    """An `Idempotency-Key` already used for a different request (method, path or body)."""

    code = "idempotency_key_reused"
    http_status = 409


class BadSignature(CardhourError):
    """A webhook whose signature is missing, malformed, wrong or outside the time tolerance."""

    code = "bad_signature"
    http_status = 400


class NotConfigured(CardhourError):
    """The deployment lacks a setting this endpoint needs (e.g. the webhook secret)."""

    code = "not_configured"
    http_status = 503


class TooLarge(CardhourError):
    """A request body over its limit (e.g. an app call's input over 10 MB)."""

    code = "too_large"
    http_status = 413


class AppFailed(CardhourError):
    """A marketplace app failed the call itself: it answered non-2xx or an output that is not
    JSON. The call is not charged."""

    code = "app_failed"
    http_status = 502


class Overloaded(CardhourError):
    """Every replica of the app has its calls in flight and no more may start: retry later."""

    code = "over_capacity"
    http_status = 429


class Unavailable(CardhourError):
    """No replica of the app could start, or the one chosen did not answer, in time."""

    code = "unavailable"
    http_status = 503
