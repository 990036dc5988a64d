"""The declarative base every row class shares, and the timestamp column type."""

from __future__ import annotations

from sqlalchemy import (
    DateTime,
)
from sqlalchemy.orm import DeclarativeBase

TS = DateTime(timezone=True)


class Base(DeclarativeBase):
    pass
