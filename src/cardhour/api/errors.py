"""The one error handler: every error leaves as `{"error": {"code", "message"}}`."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from cardhour.core.errors import CardhourError

log = logging.getLogger("cardhour.api")


def error_response(status: int, code: str, message: str, **details: object) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "details": details}}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, headers=headers)


def install(app: FastAPI) -> None:
    @app.exception_handler(CardhourError)
    async def _known(_req: Request, exc: CardhourError) -> JSONResponse:
        return error_response(exc.http_status, exc.code, exc.message, **exc.details)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_req: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"] if p != "body")
        return error_response(422, "invalid_input", f"{where}: {first['msg']}")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_req: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error_response(exc.status_code, code, str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(_req: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error", exc_info=exc)
        return error_response(500, "internal", "internal error; the operator has the details")
