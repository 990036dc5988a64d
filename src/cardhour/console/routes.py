"""The web console (placeholder until the console module lands in this change)."""

from __future__ import annotations

from fastapi import FastAPI


def mount_console(app: FastAPI) -> None:
    return None
