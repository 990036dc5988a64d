"""CLI: balance, prices, statements and the ledger check."""
