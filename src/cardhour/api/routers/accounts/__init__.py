"""Routes: sign-up, login, SSH keys."""
