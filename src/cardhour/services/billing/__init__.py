"""Billing: the double-entry ledger, wallets and holds, the price book, credits, metering,
statements, top-ups and payments.
"""
