"""trainmedic.schedulers.slurm.scheduler."""
