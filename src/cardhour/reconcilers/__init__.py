"""Background loops that converge the world to the recorded intent."""
