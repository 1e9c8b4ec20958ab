"""One module per ``trainmedic`` subcommand: ``add_arguments`` and ``run``."""
