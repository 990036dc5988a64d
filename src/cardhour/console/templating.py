"""The console's Jinja2 environment: the templates (in the package, `templates/`) and filters."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from importlib import resources
from pathlib import Path

from fastapi.templating import Jinja2Templates

HERE = Path(str(resources.files("cardhour.console")))
templates = Jinja2Templates(directory=str(HERE / "templates"))


def cny(amount: str | None) -> str:
    """A decimal amount string, half up to the fen and grouped ("8,755.20"); never via float."""
    if amount is None:
        return "—"
    return f"{Decimal(amount).quantize(Decimal('0.01'), rounding=ROUND_HALF_UP):,}"


templates.env.filters["cny"] = cny
