"""`cardhour volumes`: persistent volumes."""
