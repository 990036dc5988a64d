"""CLI: offers, launch, instances, ssh and Slurm files."""
