"""Routes: persistent volumes."""
