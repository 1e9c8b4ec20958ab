"""trainmedic.schedulers.local.scheduler."""
