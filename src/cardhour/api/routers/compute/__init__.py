"""Routes: offers, instances and clusters, and the fleet's admin side (nodes, defragmentation)."""
