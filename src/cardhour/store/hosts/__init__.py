"""Hosts: GPU servers run by host agents, and the containers wanted on them."""
