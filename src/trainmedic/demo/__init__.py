"""``trainmedic demo``: real DDP training on this machine, faults injected, detected,
attributed and recovered by the real service."""
