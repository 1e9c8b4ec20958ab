"""trainmedic.core.engine."""
