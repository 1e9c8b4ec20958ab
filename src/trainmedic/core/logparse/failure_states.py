"""Failure words the first list (``logparse/evidence.py``) lacks: states and losses that a
status table, a controller, a coordinator or a diagnostics tool prints without saying
"error" or "failed".

A status table's row names a failed state in one token (``ImagePullBackOff``,
``ErrImagePull``, ``OUT_OF_MEMORY``, ``BackoffLimitExceeded``, ``DeadlineExceeded``); a
coordinator says it lost a task as "no heartbeat" or "heartbeat timeout". These lines are
failure evidence like any other, so the evidence layer can read their words; the same
filters (quiet levels, zero counts, option names) still apply to them.
"""

from __future__ import annotations

import re

from trainmedic.core.signatures.prefilter import trie_pattern

# The precise test, case-sensitive where the state is a token of a table.
STATE_WORDS = re.compile(
    r"ImagePullBackOff|ErrImagePull|ErrImageNeverPull|InvalidImageName|\bOUT_OF_MEMORY\b"
    # nvidia-smi's ERR! for a whole GPU (its -L line, or several fields of its row); one field
    # alone (a power reading) is a transient read the tool prints on healthy GPUs too
    r"|^\s*GPU \d+: .*\bERR!|\bERR!.*\bERR!"
    r"|BackoffLimitExceeded|DeadlineExceeded|\bDEADLINE\b|\bBackOff\b|ContainerCannotRun"
    r"|[Nn]o heartbeat|[Hh]eartbeat (?:timeout|timed? out|lost|missed|expired|failure)"
    r"|[Mm]issed (?:\d+ |too many )?(?:consecutive )?heartbeats|[Ff]ailed to heartbeat"
    # a node condition in force (an event, or a conditions row that is not False)
    r"|(?<!No)(?:Disk|Memory|PID)Pressure\b(?!\s+(?:False|Unknown))"
    r"|ReqNodeNotAvail|Can Never Run|[Cc]lock skew (?:too great|too large|detected|exceed)"
    # a job put back in the queue; a GPU's hardware slowdown in force (not "Not Active")
    r"|\b[Rr]equeu(?:ed|ing)\b|\bHW (?:Thermal |Power Brake )?Slowdown\b(?!\s*:\s*Not Active)"
    r"|\b(?:[Rr]ebooted|[Pp]ower(?:ed)? (?:off|cycled)) unexpectedly\b"
    # ibdiagnet / ibdiag tools mark their errors "-E-" (warnings "-W-", information "-I-")
    r"|^\s*-E-\s"
)
# Lower-cased fragments for the cheap gate on raw lines (a superset of the above).
FAST_STATE_WORDS = (
    "imagepullbackoff", "errimagepull", "errimageneverpull", "invalidimagename",
    "out_of_memory", "backofflimitexceeded", "deadline", "backoff",
    "containercannotrun", "heartbeat", "reqnodenotavail", "can never run",
    "clock skew", "-e- ", "pressure", "err!", "requeu", "hw thermal slowdown", "hw slowdown",
    "hw power brake slowdown", "unexpectedly",
)  # fmt: skip
_FAST_STATES = re.compile(trie_pattern(FAST_STATE_WORDS).encode())


# An interface listing's row (``ip link`` / ``ip addr``): "state DOWN" on an unused port is
# how a healthy server lists it. logparse/linkstate.py reads the fabric interfaces' rows.
_LISTING_ROW = re.compile(r"^\s*(?:\d+: )?[\w.@-]+: <[A-Z,_-]*> mtu \d+")


def is_listing_row(body: str) -> bool:
    """An interface listing row: not failure evidence by its words alone."""
    return _LISTING_ROW.match(body) is not None


def may_name_a_state(raw: bytes) -> bool:
    """The cheap test on a raw line: one of the extra words present, any case."""
    return _FAST_STATES.search(raw.lower()) is not None


def names_a_state(body: str) -> bool:
    """Whether a message carries one of the extra failure words."""
    return STATE_WORDS.search(body) is not None
