"""CLI: sign-up, login, SSH keys."""
