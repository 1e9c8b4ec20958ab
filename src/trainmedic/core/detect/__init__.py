"""trainmedic.core.detect: pure detectors (crash, hang, straggler, NaN) and per-job state.

Nothing here reads a clock or does I/O: the current time is an argument.
"""

from trainmedic.core.detect.anomaly import Anomaly, Trigger
from trainmedic.core.detect.cadence import ReportCadence
from trainmedic.core.detect.config import SMALL_JOB, DetectorConfig
from trainmedic.core.detect.crash import crash_from_event, crash_from_status, is_fatal_event
from trainmedic.core.detect.hang import HangInputs, check_hang, hang_from_event, hang_threshold
from trainmedic.core.detect.nan import is_nan_event, nan_from_event, nan_from_progress
from trainmedic.core.detect.state import JobDetectorState
from trainmedic.core.detect.straggler import RankTiming, SlowRank, check_straggler, find_slow_ranks

__all__ = [
    "SMALL_JOB",
    "Anomaly",
    "DetectorConfig",
    "HangInputs",
    "JobDetectorState",
    "RankTiming",
    "ReportCadence",
    "SlowRank",
    "Trigger",
    "check_hang",
    "check_straggler",
    "crash_from_event",
    "crash_from_status",
    "find_slow_ranks",
    "hang_from_event",
    "hang_threshold",
    "is_fatal_event",
    "is_nan_event",
    "nan_from_event",
    "nan_from_progress",
]
