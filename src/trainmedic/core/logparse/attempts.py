"""Where a new attempt of a job begins in its log, without trainmedic's banner.

A job log that spans attempts (Slurm ``--open-mode=append``, torchrun restarting its workers)
holds the earlier attempts' failures above the current attempt's lines. What the workload
itself prints when it (re)starts marks the boundary:

* trainmedic's own banner (``trainer start attempt=2``, the local backend's header);
* a resume or restore announcement: ``event=resume ckpt=... iter=860`` (a JSON-lines
  logger's ``"event": "checkpoint_restored"``), "Resuming from
  checkpoint at step 860", "Restored all states from the checkpoint", Megatron's "loading
  checkpoint from ... at iteration 860", HF's "Continuing training from checkpoint";
* torchrun's elastic agent restarting its workers ("... will restart worker group") or
  starting (its ``OMP_NUM_THREADS`` notice, printed once per launch on stderr).

Every rank prints its own announcement, and one rank may fail before another has printed
its own: ``AttemptSplitter`` treats the announcements of one start-up as one boundary. A new
attempt begins at an announcement only when training progressed since the last boundary, or
when the announcing rank already announced since it (a rank announces once per start).

Pure and cheap on the common line: a few substring tests before any regular expression.
"""

from __future__ import annotations

import re

# The attempt banner the example trainer and the local backend print at every (re)start
# ("trainer start attempt=2 ...", "==== <time> trainmedic-local job=7 attempt=2 ...").
ATTEMPT_BANNER = re.compile(r"(?:trainer start|trainmedic\S*(?: job=\S+)?) attempt=(\d+)")

_RESTART = re.compile(
    r"(?i)(?<![\w.])(?:event|evt|type|kind|phase|stage|action|what)="
    r"(?:resume|resumed|resuming|restore|restored|restart|restarted|load_checkpoint|ckpt_load)"
    r"(?![\w-])"
    # the same as a JSON field: {"event": "checkpoint_restored", "step": 1900, ...}
    r'|"(?:event|evt|type|kind|phase|stage|action|what)"\s*:\s*"(?:\w+_)?'
    r'(?:resume|resumed|resuming|restore|restored|restart|restarted|load_checkpoint|ckpt_load)"'
    r"|\b(?:resum(?:e|ed|ing)|restor(?:e|ed|ing))\b.{0,80}?"
    r"\b(?:checkpoint|ckpt|states?|iteration|iter|step|epoch)\b"
    r"|\bload(?:ing|ed)\b.{0,40}?\bcheckpoint\b.{0,300}?\bat iteration\s+\d+"
    r"|\bContinuing training from checkpoint"
    r"|\bwill restart worker group|\bRestarting worker group"
    r"|Setting OMP_NUM_THREADS environment variable for each process"
)
_RANK_KV = re.compile(r"(?<![\w.])rank[=:]\s?(\d{1,6})\b")


def is_restart_line(body: str) -> bool:
    """Whether a line announces that the workload (re)starts: see the module doc."""
    if not (
        "esum" in body
        or "estor" in body
        or "ESUM" in body
        or "ESTOR" in body
        or "oading" in body
        or "oaded" in body
        or "ontinuing" in body
        or "estart" in body
        or "OMP_NUM_THREADS" in body
        or "attempt=" in body
    ):
        return False  # the common line: a chain of ``in`` tests, the cheapest rejection
    if "%|" in body:
        return False  # a progress bar ("Loading checkpoint shards: 40%|") loads, not resumes
    return ATTEMPT_BANNER.search(body) is not None or _RESTART.search(body) is not None


def announcing_rank(text: str, prefix_rank: int | None) -> int | None:
    """The rank that printed a restart line: its prefix's, else a ``rank=N`` field."""
    if prefix_rank is not None:
        return prefix_rank
    m = _RANK_KV.search(text)
    return int(m.group(1)) if m else None


class AttemptSplitter:
    """Feeds on a file's lines in order; ``boundary`` says when a new attempt begins."""

    __slots__ = ("_announced", "_progress_at_start", "attempts")

    def __init__(self) -> None:
        self._announced: set[int | None] = set()
        self._progress_at_start = 0
        self.attempts = 0  # boundaries seen (the first attempt of a log has none)

    def boundary(self, rank: int | None, progress_reports: int) -> bool:
        """A restart line of ``rank`` arrives, ``progress_reports`` steps into the file:
        whether it starts a new attempt (True) or belongs to the start-up already seen."""
        trained = progress_reports > self._progress_at_start
        if self.attempts and not trained and rank not in self._announced:
            self._announced.add(rank)
            return False
        self._announced = {rank}
        self._progress_at_start = progress_reports
        self.attempts += 1
        return True


# Lightning's train bar as tqdm draws it in a file: "Epoch 12:  23%|██▎    | 46/200 [00:03<...",
# and a resumed fit's "Training: |          | 198/? [00:00<...".
_EPOCH_BAR = re.compile(
    r"(?:^|\s)(?:Epoch (\d{1,9})|Training): *(?:\d{1,3}%)?\|[^|]{0,300}\|"
    r" *(\d{1,12})/(?:\d{1,12}|\?) \["
)


class BarRestart:
    """A per-epoch bar (Lightning's) drawn again from an earlier position: a new run of the
    program, in a file that holds no restart line of its own (a Lightning job's stdout holds
    only its bar; torchrun's and Lightning's start-up lines go to stderr). Within one run the
    bar's position never goes back: ``Epoch E: n/T`` moves on as ``(E, n)``, ``Training:
    n/?`` (drawn only by a fit that just started) counts up, and a ``Training`` bar turns into
    ``Epoch`` bars, never the other way. So a ``Training`` draw after an ``Epoch`` bar or below
    the previous ``Training`` count, or an ``Epoch`` bar before the previous one, begins a new
    attempt (the live engine, reading one attempt's lines, never sees one). A draw at 0
    is the bar's reset (every epoch's start draws one under the old label), not a position."""

    __slots__ = ("_labelled", "_training")

    def __init__(self) -> None:
        self._labelled: tuple[int, int] | None = None  # the last "Epoch E: n/T" as (E, n)
        self._training: int | None = None  # the last "Training: n/?" count

    def restarts(self, text: str) -> bool:
        """Whether ``text``, a line that may be such a bar, begins a new run."""
        bar = _EPOCH_BAR.search(text)
        if bar is None:
            return False
        count = int(bar.group(2))
        if count == 0:
            # tqdm's reset: Lightning draws the bar at 0 under the old label at every epoch's
            # start ("Epoch 9: 0/200" after "Epoch 9: 200/200", "Training: 0/?" after the
            # restored batches) and as a fit's first draw. A zero holds no position: a new
            # run shows at its first counted draw.
            return False
        if bar.group(1) is None:
            new = self._labelled is not None or (
                self._training is not None and count < self._training
            )
            if new:
                self._labelled = None
            self._training = count
            return new
        position = (int(bar.group(1)), count)
        new = self._labelled is not None and position < self._labelled
        if new:
            self._training = None
        self._labelled = position
        return new
