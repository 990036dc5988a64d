"""CLI: grant proposals (team side) and their review (reviewers and admins)."""
