"""Queries on proposals, reviews, notifications and grants (flush, never commit)."""
