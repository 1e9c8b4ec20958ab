"""A real multi-node Slurm cluster on one machine, for tests and for trying trainmedic.

See ``SlurmCluster``; facts behind the settings are in the project's SLURM_LAB notes.
"""

from trainmedic.lab.cluster import LAB_DIR_ENV, SlurmCluster
from trainmedic.lab.install import SlurmLabUnavailable

__all__ = ["LAB_DIR_ENV", "SlurmCluster", "SlurmLabUnavailable"]
