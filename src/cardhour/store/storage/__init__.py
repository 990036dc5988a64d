"""Queries on persistent volumes (flush, never commit)."""
