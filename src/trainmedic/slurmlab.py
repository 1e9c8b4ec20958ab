"""``python -m trainmedic.slurmlab up|down|status --dir D``: the lab Slurm cluster on one
machine, under the name docs/slurm-users.md and issue 8 use; the same as
``python -m trainmedic.lab`` (``trainmedic.lab.__main__``)."""

from __future__ import annotations

import sys

from trainmedic.lab.__main__ import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
