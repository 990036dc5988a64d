"""The one error handler: every error leaves as `{"error": {"code", "message"}}`."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as SATimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException

from cardhour.core.errors import CardhourError

RETRYABLE_SQLSTATES = {"40001", "40P01"}  # serialization failure, deadlock detected

log = logging.getLogger("cardhour.api")


def error_response(status: int, code: str, message: str, **details: object) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "details": details}}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if "retry_after" in details:
        headers = {"Retry-After": str(details["retry_after"])}
    return JSONResponse(body, status_code=status, headers=headers)


def install(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(_req: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"] if p != "body") or "body"
        if first["type"] == "invalid_input":  # a body's own check (core), naming the field
            return error_response(422, "invalid_input", first["msg"], field=where)
        if first["type"] == "extra_forbidden":
            return error_response(422, "invalid_input", f"unknown field {where!r}", field=where)
        return error_response(422, "invalid_input", f"{where}: {first['msg']}")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_req: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error_response(exc.status_code, code, str(exc.detail))

    for kind in (CardhourError, IntegrityError, OperationalError, SATimeoutError, Exception):
        app.add_exception_handler(kind, _mapped)


async def _mapped(_req: Request, exc: Exception) -> JSONResponse:
    return response_for(exc)


def response_for(exc: Exception) -> JSONResponse:
    """The answer to an error raised outside request validation and routing: a known one's
    status and code, a database's 409/503, anything else a logged 500."""
    if isinstance(exc, CardhourError):
        return error_response(exc.http_status, exc.code, exc.message, **exc.details)
    if isinstance(exc, IntegrityError):
        log.info("integrity error mapped to 409: %s", exc.orig)
        return error_response(409, "conflict", "a concurrent request changed the same thing")
    if isinstance(exc, OperationalError):
        if getattr(exc.orig, "sqlstate", None) in RETRYABLE_SQLSTATES:
            return error_response(409, "busy", "a concurrent request held the same rows; retry")
        log.exception("database error", exc_info=exc)
        return error_response(503, "database_unavailable", "the database is not available")
    if isinstance(exc, SATimeoutError):
        log.warning("no database connection free: %s", exc)
        return error_response(503, "database_unavailable", "no database connection is free; retry")
    log.exception("unexpected error", exc_info=exc)
    return error_response(500, "internal", "internal error; the operator has the details")
