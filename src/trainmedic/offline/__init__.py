"""trainmedic.offline."""
