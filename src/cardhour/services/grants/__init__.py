"""Grants: the compute-grant programme (proposals, reviews and decisions, grants as card-hour
accounts).
"""
