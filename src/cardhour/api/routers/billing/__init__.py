"""Routes: balance, quotes, prices, statements, top-ups and payments (and their admin side)."""
