"""Queries on users, API keys and SSH keys (flush, never commit)."""
