"""SQLAlchemy rows, engine, unit of work, locking helpers and migrations."""
