"""``python -m trainmedic.demo.trainer``: the example trainer (see ``cli``)."""

from trainmedic.demo.trainer.cli import main

main()
