"""trainmedic.core."""
