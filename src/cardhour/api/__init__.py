"""The REST API under /api/v1 (FastAPI).

Thin: validate, call a service, commit, wake the reconcilers.
"""
