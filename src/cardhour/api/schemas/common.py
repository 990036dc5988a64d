"""Bodies every part of the API shares: errors, health.

Pure pydantic: the typed client (`cardhour.client`) imports these too.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class ErrorBody(BaseModel):
    code: str
    message: str
    details: dict[str, Any] = {}


class ErrorRead(BaseModel):
    error: ErrorBody


class HealthRead(BaseModel):
    status: str
    version: str
    database: str
    backend: str
