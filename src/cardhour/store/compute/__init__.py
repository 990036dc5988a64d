"""Queries on instances, nodes and allocations (flush, never commit)."""
