"""Lines with failure words that report no failure: the all-clear side of the evidence scan.

``logparse/evidence.py`` keeps lines that say something failed; this pattern vetoes the ones
whose failure word is part of a report that nothing failed: zero counts and empty error
fields, success states, retry notices, metrics and settings named after errors, health tools'
fields at their all-clear values, thresholds listed beside readings, a table's legend, a
firmware refusing a query it does not implement, a link's pre-correction error counts. Each
clause says why it is no failure; a non-zero or failed form of the same report stays evidence.
"""

from __future__ import annotations

import re

NOT_FAILURE = re.compile(
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
    # a link's raw (pre-FEC) error counts (mlxlink's "Raw Physical Errors Per Lane", "raw
    # errors", "pre-FEC errors"): what forward error correction exists to correct, so a healthy
    # link at speed shows them; the effective (post-FEC) count and symbol errors stay evidence
    r"|^\s*(?:raw|pre-?fec)(?: physical)? (?:bit )?errors?(?: per lane)?\s*[:=]"
    # a socket call on descriptor -1 (UCX's sock.c "send(fd=-1) failed: Bad file descriptor",
    # recv/sendmsg alike): the library's own endpoint, already closed, touched again while it
    # sets up or tears down its connections; a live connection failing names its real fd
    r"|\b(?:send|recv|sendmsg|recvmsg|write|read)v?\(fd=-1\) failed\s*:\s*Bad file descriptor"
)
