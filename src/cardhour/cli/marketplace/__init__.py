"""CLI: the app marketplace."""
