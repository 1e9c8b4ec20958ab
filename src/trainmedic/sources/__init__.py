"""trainmedic.sources: the imperative shell that turns the world into observations.

Each source has ``poll() -> list[Observation]`` that never raises for an unreadable input
(it reports a ``SourceStale`` once instead) and takes an injectable ``clock``.

* ``LogFollower`` (follower.py): ``tail -F`` for one file
* ``JobLogSource`` (joblog.py): a job's logs and JSONL progress files
* ``KernelLogSource`` (kernel.py): one node's kernel log
* ``CheckpointWatcher`` (checkpoints.py): the newest checkpoint in a directory
* ``DcgmScraper`` (dcgm.py): GPU telemetry from a DCGM-exporter endpoint (needs the
  ``service`` extra: prometheus-client); ``DcgmExporterStub`` (dcgm_stub.py) serves one
* ``telemetry_to_events`` (telemetry.py, pure): telemetry changes -> Events

Import the submodules directly; this package imports nothing so that prometheus-client stays
optional for the rest.
"""
