"""Queries per aggregate.

Functions here flush, never commit: the entry point owns the transaction.
"""
