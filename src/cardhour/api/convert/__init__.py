"""Rows and service results turned into the API's read schemas."""
