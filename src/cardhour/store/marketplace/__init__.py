"""Queries on the marketplace's rows (flush, never commit): apps and their versions (`apps`),
paid calls (`calls`), developers' payouts (`payouts`), replicas' fleet shares (`replicas`)."""
