"""Use cases. Each takes a session and `now`, flushes, and leaves the commit to the entry point."""
