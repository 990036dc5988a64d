"""Accounts: users and their API keys and roles, SSH public keys, the notification outbox."""
