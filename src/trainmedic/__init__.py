"""trainmedic: keep distributed training jobs productive."""

__version__ = "0.1.0"
