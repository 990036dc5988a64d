"""Trace replay: read a trace, replay it through a policy, report the result."""
