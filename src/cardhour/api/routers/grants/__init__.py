"""Routes: grant proposals, reviews, decisions and grant hours."""
