"""Identifiers and secrets."""

from __future__ import annotations

import hashlib
import secrets
import uuid


def new_id() -> str:
    return uuid.uuid4().hex[:16]


def new_secret(prefix: str) -> str:
    return f"{prefix}_{secrets.token_urlsafe(32)}"


def hash_secret(secret: str) -> str:
    """SHA-256 suffices for 256-bit random tokens (passwords use argon2)."""
    return hashlib.sha256(secret.encode()).hexdigest()
