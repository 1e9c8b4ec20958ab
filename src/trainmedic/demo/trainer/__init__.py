"""A real workload for the demo and the end-to-end tests.

- ``trainer``: ``python -m trainmedic.demo.trainer.cli`` under torchrun (gloo, CPU): progress
  lines, atomic checkpoints, resume, fault injection. ``train_loop`` holds its torch part.
- ``rank_log``: the line format (one ``os.write`` per line) and the JSONL progress protocol.
- ``faults`` / ``fault_injector``: fault specs (faults.json / TRAINMEDIC_FAULTS) and firing.
- ``checkpoints``: atomic save, newest-checkpoint lookup.
"""
