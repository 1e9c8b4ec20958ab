"""Failure evidence that no signature knows: lines that *say* something failed.

The catalogue knows the exact lines it was shown; a real log often fails with a line it has
never seen (a new error text, a tool's output, a wrapper's message). This collector keeps the
lines of a file that carry failure words (error, failed, fatal, killed, timeout, exception,
cancelled, evicted, exit codes, signals, ...) and were not matched by any signature, so that
the general evidence layer (``core/attribute/evidence.py``) can still name a category, with
less confidence, instead of saying "no failure".

What is *not* evidence: warning/info-level lines (a library's warning that mentions an error
did not end the job), zero counts ("0 errors", "number of nan iterations: 0"), option names
("error_file", "timeout=1800"), NCCL INFO chatter and traceback frames (the exception line that
ends a traceback is what counts). Kept per file: the first ``HEAD`` and the last ``TAIL`` such
lines, and how many there were.

Cost: the scan remembers the gate's answer per line *shape* (its bytes without digits), so the
few shapes a large log repeats are tested once.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from trainmedic.core.logparse.failure_states import (
    is_listing_row,
    may_name_a_state,
    names_a_state,
)
from trainmedic.core.logparse.not_failure import NOT_FAILURE
from trainmedic.core.logparse.results import is_header_row
from trainmedic.core.signatures.prefilter import trie_pattern

HEAD = 40
TAIL = 80
MAX_TEXT = 400

# Failure words: case-sensitive fragments with their boundaries (the precise test).
_WORDS = re.compile(
    r"rror|ERROR|[Ff]ail|FAIL|[Ff]atal|FATAL|[Kk]illed|KILLED|[Ee]xception|[Tt]imeout|TIMEOUT"
    r"|[Tt]imed out|[Aa]bort|ABORT|[Pp]anic|PANIC|[Ss]egfault|[Ss]egmentation|[Cc]ore dumped"
    r"|Traceback|[Cc]ancel|CANCEL|[Ee]vict|[Pp]reempt|PREEMPT|[Ee]xit code|[Ee]xit status"
    r"|[Ee]xitcode|[Rr]eturn code|SIG(?:KILL|TERM|ABRT|SEGV|BUS|HUP|INT|ILL|FPE)|[Ss]ignal \d"
    r"|WTERMSIG|[Dd]eadlock|[Hh]ung task|[Nn]ot responding|NOT_RESPONDING|[Uu]nreachable"
    r"|[Nn]ot found|[Dd]enied|[Cc]ould not |[Cc]ouldn't |COULD NOT |[Nn]o route to host"
    r"|\b(?:not|never) (?:completed?|finished)\b|did not (?:complete|finish|come back|respond)"
    r"|[Rr]efused|[Cc]annot |[Cc]an't |[Uu]nable to|[Ii]nvalid|[Ii]llegal|[Mm]ismatch|[Cc]rash"
    r"|[Dd]ied\b|\b[Dd]ead\b|[Tt]erminat|TERMINAT|\bOOM|[Oo]ut of memory|[Uu]nhealthy|NotReady"
    r"|[Cc]ritical|CRITICAL|[Cc]orrupt|\b[Ll]ost\b|\b(?:[Dd]own|DOWN)\b|[Ss]tuck|\b[Hh]ung\b"
    r"|[Hh]anging|[Nn]o space left|[Ii]/O error"
    # a quota only when it was hit ("Quota mode: none", lfs's "Disk quotas for usr" header and
    # a pod's "Resource Quotas" listing are none)
    r"|[Qq]uota\b[^.;]{0,40}\b(?:exceeded|exhausted|reached)|QUOTA_EXCEEDED|QuotaExceeded"
    r"|[Oo]ver (?:the )?quota|[Ee]xceed\w* (?:\w+ )?quota|[Ii]nsufficient quota"
    r"|[Uu]ncorrectable|UNCORRECTABLE|[Uu]nrecoverable|[Rr]edundancy [Ll]ost"
    # a reading crossing its limit (a threshold only listed beside a reading is no event)
    r"|[Oo]ver[- ]?[Tt]emperature|OVERTEMP|[Tt]hermal [Tt]rip"
    # a part that overheated (a state: "Overheated", "is overheating"; not "overheat
    # protection" or "to prevent overheating")
    r"|(?<!prevent )(?<!avoid )\b[Oo]verheat(?:ed|ing)\b|\bOVERHEAT(?:ED|ING)?\b"
    r"|[Uu]pper (?:[Cc]ritical|[Nn]on-[Rr]ecoverable) (?:- )?going high"
    r"|(?:above|exceed\w*|greater than|crossed) (?:the )?upper (?:critical|non-recoverable)"
    r"|[Ss]ensor (?:degraded|failed|failure)"
    r"|[Ee]xpelled|[Ll]ease (?:has )?expired|[Rr]eset is required|[Nn]eeds? (?:a )?reset"
    r"|\b[Jj]ob <?\d[\w.\[\]>]* (?:was )?deleted\b|[Aa]llocation (?:has )?expired"
    # the batch system's own word that it removed the job (PBS/Torque mail and MOM: "Job
    # deleted at request of root@host") or that a job went over a limit it enforces ("job 12
    # exceeded MEM usage hard limit (2528 > 1126)", "exceeded walltime limit")
    r"|\b[Jj]ob (?:was )?deleted (?:at (?:the )?request|by)\b"
    r"|\b[Ee]xceeded (?:(?:\w+ ){0,3}(?:hard|usage)|(?:its )?(?:mem\w*|vmem|pmem|walltime"
    r"|wallclock|cput|cpu ?time)) limit\b"
    # a node the scheduler took out of service (its Reason= says why)
    r"|\bState=[\w+]*(?:DRAIN|FAIL)|[Rr]evoked|[Nn]o such device"
    # health tools' own verdicts: pages a GPU must retire, a port without link, a cluster
    # store in error
    r"|Pending Page (?:Blacklist|Retirement)\s*:\s*Yes|Double Bit ECC\s*:\s*[1-9]"
    r"|Link detected: no|\bHEALTH_ERR\b|[Dd]egraded data redundancy"
    # a pod that has waited to be scheduled for ten minutes or more (kubectl get pods)
    r"|^\s*\S+\s+0/\d+\s+Pending\s+\d+\s+(?:\d+d|\d+h|[1-9]\d+m)"
)
# The same words lower-cased, as a trie: the fast gate on every new line shape (a superset).
FAST_WORDS = (
    "rror", "fail", "fatal", "killed", "exception", "timeout", "timed out", "abort", "panic",
    "segfault", "segmentation", "core dumped", "traceback", "cancel", "evict", "preempt",
    "exit code", "exit status", "exitcode", "return code", "sigkill", "sigterm", "sigabrt",
    "sigsegv", "sigbus", "sighup", "sigint", "sigill", "sigfpe", "signal ", "wtermsig",
    "deadlock", "hung", "not responding", "unreachable", "not found", "denied", "refused",
    "cannot ", "can't ", "could not ", "couldn't ", "no route to host", "not complete",
    "never complete", "not finish", "never finish", "did not come back", "did not respond",
    "unable to", "invalid", "illegal", "mismatch", "crash", "died", "dead",
    "terminat", "oom", "out of memory", "unhealthy", "notready", "critical", "corrupt", "lost",
    "down", "stuck", "hanging", "no space left", "quota", "i/o error",
    "uncorrectable", "unrecoverable", "redundancy lost", "overtemp", "over temp", "over-temp",
    "thermal trip", "overheat", "upper critical", "upper non-recoverable", "sensor degraded",
    "sensor fail",
    "expelled", "exceeded",
    "lease expired", "lease has expired", "reset is required", "need reset", "needs reset",
    "need a reset", "needs a reset", "deleted", "allocation expired", "allocation has expired",
    "state=", "revoked", "no such device", "pending page", "double bit ecc", "link detected",
    "health_err", "degraded data", "pending", "message id", "messageid",
)  # fmt: skip
_FAST = re.compile(trie_pattern(FAST_WORDS).encode())
# A level word at the start of the message, or a glog/absl "W...  file.cc:12]" stamp.
_QUIET_LEVEL = re.compile(
    r"^\s*(?:\[?[IWD]\d{4}\s|\[?(?:INFO|DEBUG|WARNING|WARN|Warning(?!\s{2,}[A-Z][A-Za-z]+\s)"
    r"|NOTICE|Note|note)\b\]?[\s:-]"
    r"|[IW] [\w/.-]+\.(?:cc|cpp|h|py):\d+\])"
    r"|\b(?:UserWarning|FutureWarning|DeprecationWarning|RuntimeWarning|ResourceWarning"
    r"|warnings\.warn)\b|\[(?:INFO|WARNING|DEBUG)\]| - (?:INFO|WARNING|DEBUG) - "
    r"|\s[IW] [\w/.-]+\.(?:cc|cpp|h):\d+\]|NCCL INFO|\bINFO\b(?!.*\b(?:[Ee]rror|[Ff]ailed)\b)"
)
# The level of a glog/absl/torch prefix the prefix parser removed ("W0101 00:00:00.0 f.cc:1]",
# "[I307 05:30:20...]"): info and warning lines are no evidence; E and F lines are.
# c10's own stamp ("[W socket.cpp:601]", "[I ProcessGroupNCCL.cpp:835]") likewise.
_QUIET_PREFIX = re.compile(
    r"(?:^|[\[\s:])[IWD]\d{3,4} |^\s*\[[IWD] [\w/.-]+\.(?:cc|cpp|h|py):\d+\]"
)
# Option and setting names built from failure words ("error_file", "sync_timeout",
# "--max-failures", "timeout=1800"): masked out of the line before the failure words are looked
# for, not a veto on the line, so that "ERROR ... could not upload checkpoint ... increase
# sync_timeout" stays evidence while "error_file: <N/A>" alone is none.
_OPTION_NAME = re.compile(
    r"(?i)\w*error_file\w*|\w*on_error\w*|(?<![a-z])errors=|\w*error_handler\w*|\w*_timeout\b"
    r"|\btimeout_\w*|\btimeout\s*[=:]\s*\d|\w*raise_on\w*|\w*fail_on\w*|\w*fault.?toleran\w*"
    r"|\w*auto.?requeue\w*|--[\w-]*(?:timeout|error|fail)[\w-]*"
    # a component named after what it watches for (Spark's "TaskFailureListener is registered",
    # an "ErrorHandler" or "TimeoutCallback" installed): a class name, no event; a line that
    # also says something failed keeps its other words
    r"|(?-i:\w*(?:Failure|Failed|Error|Exception|Fault|Timeout|Crash)(?:Listener|Handler"
    r"|Callback|Hook|Detector|Reporter|Tracker|Monitor|Policy|Strategy|Notifier|Interceptor)s?)\b"
)
# Traceback frames, C++ frames, rich panels, and "#" comment lines (benchmark table headers
# such as nccl-tests' "... busbw  error" column row).
_FRAME = re.compile(r'^\s*(?:File "|frame #\d+:|at \S+\(|#\d+ 0x|\d+ │|│|#)')
# A management controller's event record printed as fields (Dell iDRAC / Lifecycle log):
# its "Message ID" names the server's subsystem by prefix (CPU0000, MEM0001, PSU0003, FAN0001,
# TMP0120...), and is failure evidence when the record's own severity line said so just before.
_RECORD_SEVERITY = re.compile(r"^\s*Severity\s*:\s*(?:Critical|Error|Fatal|Failure)\b", re.I)
_RECORD_ID = re.compile(r"^\s*Message ?ID\s*:\s*[A-Z]{2,4}\d{3,4}\b")
RECORD_FIELDS = 3  # lines between a record's severity and its id


@dataclass(frozen=True, slots=True)
class EvidenceLine:
    """A line of a file that says something failed, which no signature matched."""

    source: str
    line: int
    text: str
    progress_after: int = 0  # progress lines the file printed after it (it survived many)
    results_after: int = 0  # result-table rows printed after it (the tool went on to measure)


def may_be_evidence(raw: bytes) -> bool:
    """The cheap first test (failure words present, any case), on the raw line."""
    return _FAST.search(raw.lower()) is not None or may_name_a_state(raw)


def is_failure_text(body: str) -> bool:
    """Whether a message (prefix removed) is failure evidence (see the module docstring)."""
    words = _OPTION_NAME.sub(" ", body)
    if _WORDS.search(words) is None and not names_a_state(body):
        return False
    if is_listing_row(body) or is_header_row(body):
        return False
    return not (_QUIET_LEVEL.search(body) or NOT_FAILURE.search(body) or _FRAME.match(body))


class EvidenceCollector:
    """Feed the lines the gate let through (``may_be_evidence``); ``lines()`` at the end."""

    __slots__ = ("_head", "_severe_at", "_source", "_tail", "count")

    def __init__(self, source: str) -> None:
        self._source = source
        self._head: list[EvidenceLine] = []
        self._tail: deque[EvidenceLine] = deque(maxlen=TAIL)
        self.count = 0
        self._severe_at = -RECORD_FIELDS - 1  # the last record severity line that said failure

    def feed(
        self, line_no: int, body: str, reports: int = 0, prefix: str = "", rows: int = 0
    ) -> None:
        """``body`` is the message after the line ``prefix``; ``reports`` the progress lines
        and ``rows`` the result-table rows seen so far in the file."""
        record_id = (
            line_no - self._severe_at <= RECORD_FIELDS and _RECORD_ID.match(body) is not None
        )
        if not record_id and (_QUIET_PREFIX.search(prefix) or not is_failure_text(body)):
            return
        if _RECORD_SEVERITY.match(body):
            self._severe_at = line_no
        self.count += 1
        item = EvidenceLine(self._source, line_no, body.strip()[:MAX_TEXT], reports, rows)
        if len(self._head) < HEAD:
            self._head.append(item)
        else:
            self._tail.append(item)

    def lines(self, reports: int = 0, rows: int = 0) -> tuple[EvidenceLine, ...]:
        """The kept lines, each with the progress lines and result rows printed after it
        (``reports``, ``rows``: the file's totals)."""
        return tuple(
            EvidenceLine(
                e.source,
                e.line,
                e.text,
                max(0, reports - e.progress_after),
                max(0, rows - e.results_after),
            )
            for e in (*self._head, *self._tail)
        )
