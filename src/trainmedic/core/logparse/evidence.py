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
_NOT_FAILURE = re.compile(
    r"(?i)\b(?:no|0|zero|without|ignor\w*|suppress\w*)\s+(?:any\s+)?(?:errors?|failures?|exceptions?"
    # a check that an exception did not happen ("no ValueError raised", "without OSError")
    r"|(?-i:[A-Z]\w*(?:Error|Exception)s?))\b"
    # ("Node 0 Failed", "GPU 0 failed" name a part by its number: not a count)
    r"|(?<!node )(?<!gpu )(?<!cpu )(?<!disk )(?<!drive )(?<!port )(?<!link )(?<!rank )"
    r"(?<!task )(?<!slot )(?<!fan )(?<!psu )(?<!dimm )(?<!device )(?<!worker )(?<!replica )"
    r"(?<!controller )\b(?:no|0) (?:\w+ )?(?:failed|failing|errored)\b"
    r"|\b(?:errors?|failures?|failed|fails|nan iterations|skipped iterations)\s*[:=]\s*0\b"
    # an evaluation's or a benchmark's tally of bad outcomes that came out zero, in any decimal
    # form (sglang's "Invalid: 0.000", "invalid answers: 0", "Timed out requests = 0.0 %",
    # "Aborted: 0"): a score, not a report; a non-zero tally stays evidence
    r"|\b(?:invalid|illegal|timed[ _]out|timeouts?|aborted|aborts|dropped)"
    r"(?:[ _](?:answers?|outputs?|responses?|requests?|samples?|records?|count|rate|ratio"
    r"|fraction|pct))?[\"']?\s*[:=]\s*0+(?:\.0+)?\s*%?(?![.,]?\d)"
    # success summaries: a zero or empty error field ("failed": 0, "raw_error": null,
    # error_code=0), a zero exit status, a state that says the work succeeded
    r"|(?-i:(?<![A-Za-z])[a-z_]*(?:error|fail)[a-z_]*)[\"']?\s*[:=]\s*"
    r"(?:0\b(?![.,]\d)|null\b|None\b|false\b|\"\"|''|\[\]|\{\})"
    r"|\b(?:exit ?code|exit status|exitcode|return ?code|returncode|rc)[\"']?\s*[:=]?\s*"
    r"0\b(?![.,]\d)"
    # HTCondor's user log: the terminated event's header and a normal end with status 0 (an
    # abnormal end, a signal or a non-zero return value stays evidence)
    r"|^\s*005 \(\d+\.\d+\.\d+\) .*\bJob terminated\.\s*$"
    r"|\bNormal termination \(return value 0\)"
    r"|\bSUCCEEDED\b|\bstate[\"']?\s*[:=]\s*[\"']?(?:succeeded|completed|success)\b"
    r"|\bif\b.*\b(?:fail|error)|will be (?:killed|terminated) (?:after|if)|Exception ignored in"
    # metrics named after errors ("valid ErrorRate: 2.5e-02", "top-1 error 23.4", "err_rate=0.1")
    r"|(?-i:[Ee]rr(?:or)?)[ _-]?(?:rate|ratio|pct|%)\w*[\"']?\s*[:=]?\s*[-+]?\.?\d"
    r"|\btop-?\d+[ _-]?err(?:or)?\w*[\"']?\s*[:=]?\s*\d"
    # a client that says it will retry has not failed yet; if the retries run out, it says so
    r"|entering retry loop|\b(?:will )?retry(?:ing)? (?:in|after) \d|\bwill (?:be )?retr(?:y|ied)\b"
    r"|(?<!after )(?<!while )\bretrying\b"
    # a metric of that name with a fraction ("val_error=0.124"), not an error report
    r"|(?:\b|_)(?-i:err(?:or)?s?)[\"']?\s*[:=]\s*[-+]?\d*\.\d+"
    # a plugin registered twice, a preload the loader skips: said and ignored
    r"|when one has already been registered|:\s*ignored\.?\s*$"
    # the kernel's notice that an out-of-tree module is unsigned (it loads and works)
    r"|module verification failed: signature and/or required key missing"
    # an experiment tracker's client on its own trouble (a real end of the job prints its own)
    r"|^\s*(?:wandb|comet_ml|neptune|mlflow|clearml|aim)\s*:"
    # a port counter at zero (perfquery "SymbolErrorCounter:....0"), a BMC record's recovery
    r"|(?-i:\b[A-Z]\w*(?:Error|Errors|Counter|Discards)\w*)(?::\.{2,}\s*|\s*==\s*)0\b(?![.,]\d)"
    r"|\|\s*Deasserted\s*$"
    # a sensor's limits listed beside its reading ("61 C (Upper Critical threshold 95 C)",
    # ipmitool's "Upper critical : 95.000"): a threshold, not a crossing
    r"|\((?:upper |lower )?(?:critical|non-recoverable)(?: threshold)?\s*[:=]?\s*[\d.]+\s*\S{0,8}\)"
    r"|^\s*(?:upper|lower) (?:critical|non-critical|non-recoverable)\s*:\s*[\d.]+\s*$"
    # a count of errors the hardware corrected itself (a stream of them is read elsewhere)
    r"|(?<![Uu]n)(?<![Nn]on-)\bcorrect(?:able|ed) (?:hardware |memory |ECC )?errors?"
    r" (?:detected|count)"
    # a setting echoed by a manifest or a config dump: a camelCase key named after a failure
    # word, set to a number, a duration or a boolean ("terminationGracePeriodSeconds: 30")
    r"|^\s*-?\s*[\"']?(?-i:[a-z]+(?:[A-Z][a-z]+)+)[\"']?\s*[:=]\s*[\"']?"
    r"(?:\d+(?:\.\d+)?\s*(?:ms|s|m|h)?|true|false)[\"']?,?\s*$"
    # a health tool's field (words, not an exception's name) named after a failure holding its
    # all-clear value (nvidia-smi -q "Remapping Failure Occurred : No", "HW Slowdown : Not
    # Active", smartctl "Critical Warning: 0x00"): a report that nothing failed
    r"|^\s*(?=[A-Za-z])(?=[^:]*\w \w)[\w /().-]*?"
    r"(?:fail|error|warning|fault|critical|slowdown|throttl|uncorrect|stuck)[\w /().-]*?"
    r"\s*:\s*(?:no|not active|none|n/a|0x0+|0|passed?|ok)\s*$"
    # its section headings ("ECC Errors") and the detail lines of a record the catalogue reads
    # (AER's "error status/mask=")
    r"|^\s*(?-i:(?:[A-Z][A-Za-z0-9]* )+Errors)\s*$|\berror status/mask="
    # a device that lacks an optional feature answering a capability query (NVML's "Not
    # Supported", its own status for it) and a warning that names its cost as performance
    # only: the library goes on without it (an integrated GPU, a virtual function)
    r"|\bnvml\w*\(.*\)\s*failed\s*:\s*(?-i:Not Supported)\s*$"
    r"|\bmay (?:affect|impact|degrade|reduce) (?:the )?performance\b"
    # a listing's legend naming the states its letters stand for ("Key: Up=U, Down=D"): the
    # key to a table, not a state of anything
    r"|^\s*(?:key|legend)\s*:\s*\w[\w ]*=\s*\S"
    # a NIC firmware refusing a read-only query it does not implement (mlx5's ACCESS_REG read,
    # QUERY_* with "bad operation/opcode/parameter"): a monitoring tool (ethtool, gpud, a
    # health agent) asked for a register this firmware lacks; the card goes on working
    r"|\b(?:ACCESS_REG\(0x[0-9a-f]+\)\s*op_mod\(0x1\)|QUERY_\w+\(0x[0-9a-f]+\)\s*op_mod\(0x[0-9a-f]+\))"
    r"\s*failed,\s*status bad (?:operation|opcode|param(?:eter)?)\b"
    # a health check whose measured memory is ABOVE the maximum it allows (NHC's check_hw_physmem,
    # check_hw_swap, check_hw_mem: "Actual RAM size (N kB) greater than maximum allowed"): a
    # server does not grow memory, so the check's bound was written for another node type
    # (its configuration); a size under the minimum is a part lost and stays failure evidence
    r"|\b(?:RAM|swap|system memory|memory)(?: size)?\s*\(\s*[\d.]+\s*[kmgt]i?b\s*\)\s*"
    r"(?:is )?(?:greater|more|larger) than (?:the )?max(?:imum)?(?: allowed)?\b"
    # a tester's overall verdict that it passed (stressapptest's "Status: PASS - please verify
    # no corrected errors"), whatever caveat follows it
    r"|^\s*(?:status|result|overall(?: result)?)\s*:\s*pass(?:ed)?\b"
    # a command someone typed (a shell prompt, the Python REPL): input, not what happened
    r"|^\s*(?:\$|[\w.-]+@[\w.-]+:\S*[$#]|>>>)\s+\S"
    # a whole line saying a kind of error was not seen (ras-mc-ctl's "No PCIe AER errors.")
    r"|^\s*no (?:[\w-]+ ){1,3}(?:errors?|failures?)\.?\s*$"
    # a metric sample (Prometheus exposition, dcgm-exporter, node_exporter) named after errors
    # whose value is zero: a counter or gauge that nothing incremented
    r"|^\s*(?:[A-Za-z_]\w*(?::\w+)*\{[^{}]*\}|[A-Za-z]\w*_\w*(?::\w+)*)"
    r"\s+0(?:\.0+)?(?:e[+-]?\d+)?(?:\s+\d+)?\s*$"
    # an XML element's tag alone or its zero value (nvidia-smi -q -x "<ecc_errors>",
    # "<total>0</total>"): a report's structure and all-clear counts, not an event
    r"|^\s*</?[\w.:-]+>\s*$|^\s*<([\w.:-]+)>\s*(?:0|N/A|No|None)\s*</\1>\s*$"
)
# Option and setting names built from failure words ("error_file", "sync_timeout",
# "--max-failures", "timeout=1800"): masked out of the line before the failure words are looked
# for, not a veto on the line, so that "ERROR ... could not upload checkpoint ... increase
# sync_timeout" stays evidence while "error_file: <N/A>" alone is none.
_OPTION_NAME = re.compile(
    r"(?i)\w*error_file\w*|\w*on_error\w*|(?<![a-z])errors=|\w*error_handler\w*|\w*_timeout\b"
    r"|\btimeout_\w*|\btimeout\s*[=:]\s*\d|\w*raise_on\w*|\w*fail_on\w*|\w*fault.?toleran\w*"
    r"|\w*auto.?requeue\w*|--[\w-]*(?:timeout|error|fail)[\w-]*"
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
    return not (_QUIET_LEVEL.search(body) or _NOT_FAILURE.search(body) or _FRAME.match(body))


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
