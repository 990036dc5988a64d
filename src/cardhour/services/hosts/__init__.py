"""Hosts: enrolment of GPU servers, their agents' reports, and the containers wanted on them."""
