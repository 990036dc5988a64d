"""Passwords are stored as argon2id at its production cost (the rest of the suite hashes
cheaply: tests/conftest.py `cheap_passwords`)."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from cardhour.core.errors import Unauthorized
from cardhour.db.engine import transaction
from cardhour.db.models import UserRow
from cardhour.platform import Platform
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import customers


@pytest.mark.real_password_hashing
def test_passwords_are_stored_as_argon2id_at_production_cost(platform: Platform) -> None:
    now = platform.clock.now()
    with transaction(platform.sessions) as s:
        customers.sign_up(s, "ada@example.com", "correct horse", now, platform.trial())
    with transaction(platform.sessions) as s:
        stored = s.scalars(select(UserRow.password_hash).where(UserRow.email == "ada@example.com"))
        digest = stored.one()
        assert digest.startswith("$argon2id$") and "m=65536,t=3,p=4" in digest
        assert "correct horse" not in digest
        assert accounts.sign_in(s, "ada@example.com", "correct horse").email == "ada@example.com"
        with pytest.raises(Unauthorized):
            accounts.sign_in(s, "ada@example.com", "wrong horse")
