"""Hosts: enrolment (admin) and the host agents' channel."""
