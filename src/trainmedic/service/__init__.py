"""trainmedic.service.loop."""
