"""Fragmentation gradient descent: the score, its per-node table, and the lookahead over sampled
futures.
"""
