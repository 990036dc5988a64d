"""The AI app marketplace: apps and their versions, per-call billing (70/30), developer earnings
and payouts, replicas.
"""
