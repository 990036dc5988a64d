"""Routes: the app marketplace (apps, calls, earnings, payouts)."""
