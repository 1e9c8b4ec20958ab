"""Scheduler adapters: local (embedded), slurm, fake (unit tests)."""
