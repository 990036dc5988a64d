"""Compute backends: a small base class, one package per kind of fleet."""
