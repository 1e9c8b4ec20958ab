"""Per-line progress bookkeeping for the streaming scan: cheap on every line, parsing few.

A line is a progress *candidate* when a substring test says so and it is not a line that only
names an iteration (a resume, checkpoint, config echo or error: ``progress.is_not_a_step``);
only the first candidate (to know training started) and the last few (for the summary) are
parsed. Checkpoint lines and
the distributed-init markers ("All distributed processes registered", NCCL "Init COMPLETE")
are noted on the way.
"""

from __future__ import annotations

import re
from collections import deque

from trainmedic.core.logparse.checkpoint import parse_checkpoint
from trainmedic.core.logparse.fairseq import is_fairseq_candidate
from trainmedic.core.logparse.prefix import parse_prefix
from trainmedic.core.logparse.progress import ProgressLine, is_not_a_step, parse_progress
from trainmedic.core.logparse.summary import ProgressSummary

_WORDED = re.compile(r"[A-Za-z]")
# NCCL's error return trace: "init.cc:815 -> 1", "misc/group.cc:69 -> 1 [Async thread]"
_NCCL_RETURN_TRACE = re.compile(r"\.cc:\d+ -> [1-9]\d*\b")


def _not_a_step(text: str) -> bool:
    """A progress candidate that is none of the steps it names (resume, checkpoint, config
    echo, an error naming its iteration, slurmstepd's "STEP 1.0"). Checked on every
    candidate line, so a few substring tests (the kinds seen most around failures) come
    before ``is_not_a_step``, which sees the message without its prefix (whose level word,
    "WARNING" or "W1201", says nothing about the message)."""
    if "rror" in text or "xception" in text:
        return is_not_a_step(text[parse_prefix(text).body_start :])
    if "loss" in text:
        return False  # a step reporting its loss: the common candidate, two tests only
    if not (
        "esum" in text
        or "estor" in text
        or "heckpoint" in text
        or "ckpt" in text
        or "onfig" in text
        or "slurmstepd" in text
        or "event=" in text
    ):
        return False
    return is_not_a_step(text[parse_prefix(text).body_start :])


class ProgressTracker:
    """Cheap per-line progress bookkeeping; parsing happens on few lines only."""

    __slots__ = (
        "after_init",
        "after_nccl",
        "checkpoint",
        "first",
        "init_line",
        "job_spoke",
        "last_candidates",
        "nccl_info_first",
        "nccl_net_connected",
        "nccl_seen",
        "nccl_trouble",
        "nccl_warn_seen",
        "reports",
        "screen",
    )

    def __init__(self) -> None:
        self.first: ProgressLine | None = None
        self.reports = 0
        # Whether candidates are screened for lines that only name an iteration. The count
        # matters after an event (did training go on past it?); before any, only whether a
        # first step was parsed does, and that parse screens already: the scan turns it on
        # at its first event, so a healthy log pays nothing.
        self.screen = False
        self.last_candidates: deque[str] = deque(maxlen=4)
        self.checkpoint: int | None = None
        self.init_line: int | None = None
        self.after_init = 0
        self.job_spoke = False  # a worded line other than NCCL's debug output
        self.nccl_seen = False
        self.after_nccl = 0
        self.nccl_info_first = False  # NCCL INFO (setup) lines came before any NCCL WARN
        self.nccl_warn_seen = False
        self.nccl_net_connected = False  # a channel connected "via NET/..."
        self.nccl_trouble = False  # a WARN or an error return trace

    def observe(self, line_no: int, text: str) -> None:
        # Chained ``in`` tests: the cheapest way CPython has to reject the common line.
        if (
            "iter" in text
            or "step" in text
            or "Iter" in text
            or "Step" in text
            or "%|" in text
            # fairseq names neither: its step is "num_updates", which validation lines share
            or ("num_updates" in text and is_fairseq_candidate(text))
        ):
            if self.screen and "%|" not in text and _not_a_step(text):
                pass  # a resume, checkpoint, config echo or error naming an iteration
            elif self.first is None:
                parsed = parse_progress(text[parse_prefix(text).body_start :])
                if parsed is not None:
                    self.first, self.reports = parsed, 1
            else:
                self.reports += 1
                self.last_candidates.append(text)
        if (
            "heckpoint" in text
            or "global_step" in text
            or "aving model" in text
            or "ckpt" in text
            or "event=save" in text
        ):
            self._checkpoint(text)
        # Rules ("----") and blank lines are layout, not the job going on.
        if self.init_line is not None and self.after_init <= 3 and _WORDED.search(text):
            self.after_init += 1
        if "NCCL INFO" in text or "NCCL WARN" in text:
            self.nccl_seen, self.after_nccl = True, 0
            if "NCCL WARN" in text:
                self.nccl_warn_seen = self.nccl_trouble = True
            elif not self.nccl_warn_seen:
                self.nccl_info_first = True
            if " -> " in text and _NCCL_RETURN_TRACE.search(text):
                self.nccl_trouble = True
            elif "via NET/" in text:
                self.nccl_net_connected = True
        else:
            if self.nccl_seen and self.after_nccl <= 3 and text.strip():
                self.after_nccl += 1
            if not self.job_spoke and _WORDED.search(text):
                self.job_spoke = True
        if (
            "processes registered" in text
            or "Init COMPLETE" in text
            or "nitializing distributed" in text
            or "store-based barrier" in text
        ):
            self.init_line, self.after_init = line_no, 0

    def _checkpoint(self, text: str) -> None:
        found = parse_checkpoint(text[parse_prefix(text).body_start :])
        if found is not None:
            self.checkpoint = found

    def summary(self) -> ProgressSummary:
        last = self.first
        for text in reversed(self.last_candidates):
            parsed = parse_progress(text[parse_prefix(text).body_start :])
            if parsed is not None:
                last = parsed
                break
        return ProgressSummary(
            reports=self.reports,
            first_iteration=self.first.iteration if self.first else None,
            last_iteration=last.iteration if last else None,
            last_label=last.label if last else "",
            last_elapsed_s=last.elapsed_s if last else None,
            last_step_time=last.step_time if last else None,
            last_checkpoint=self.checkpoint,
            init_complete_line=self.init_line,
            meaningful_after_init=self.after_init,
            only_nccl_lines=self.nccl_seen and not self.job_spoke,
            nccl_setup_seen=self.nccl_seen,
            nccl_setup_before_warning=self.nccl_info_first,
            nccl_net_connected_clean=self.nccl_net_connected and not self.nccl_trouble,
            meaningful_after_nccl=self.after_nccl,
        )
