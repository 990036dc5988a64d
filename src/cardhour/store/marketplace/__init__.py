"""Queries on apps, their versions, calls, payouts and replicas (flush, never commit)."""
