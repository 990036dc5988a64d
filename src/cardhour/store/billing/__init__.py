"""Queries on ledger accounts and transfers, price versions and statements (flush, never commit)."""
