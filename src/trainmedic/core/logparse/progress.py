"""Training progress lines: which iteration a job reached, how fast, with what loss.

Recognised (``parse_progress`` takes the message after the line prefix):

* trainmedic's own trainer: ``node=node2 iter=120 loss=0.53 step_s=0.012 compute_s=0.008
  wait_s=0.004 samples_per_s=2601.3``
* Megatron: `` iteration      100/  500000 | ... | elapsed time per iteration (ms): 1234.5 |
  ... lm loss: 5.4E+00 | ... grad norm: 1.2 |``
* tqdm bars (HF Trainer, Lightning ``Epoch 0:  45%|██ | 450/1000 [00:30<00:36, 15.0it/s,
  loss=0.5]``, any described bar): iteration, speed, elapsed time and the bar's description;
  a Lightning bar counts the batches of its epoch, so ``Epoch E: n/T`` is step ``E x T + n``
  (the global step its checkpoints are named by); a bar's first draw (``0/T``) is no step.
  After a resume Lightning's bar is not the global step: resumed mid-epoch it draws
  ``Training: |  | n/? [...]`` (the count within the resumed epoch, no epoch, no total), and
  resumed from a checkpoint of an epoch's last batch its epoch label can lag by one. Such a
  line carries ``epoch``/``epoch_step``/``epoch_len``, and the engine's ``EpochBarClock``
  turns it into the global step with the checkpoint the attempt resumed from.
* HF Trainer log dicts (``{'loss': 2.31, 'learning_rate': 5e-05, 'epoch': 0.1}``) only when they
  carry a ``step``: without one the dict says nothing about *which* iteration it is.
* plain ``step 100 loss 2.3``, ``Iteration 100``, ``iter 100``, ``Step 100/1000``
* fairseq's ``train_inner`` and epoch summary lines (``fairseq.py``): the step is
  ``num_updates``; its validation and test lines are no step.

Not every line naming an iteration is a step of training (``is_not_a_step``): a resume or
restore announcement (``event=resume ckpt=... iter=860``, "Resuming from checkpoint at step
860", "Restored ... iteration 860"), a checkpoint save or load, a config or argument echo
(``Namespace(iter=1000)``, ``train_iters ...... 1000``), a scheduler's line, an error message
("RuntimeError: ... at iteration 880"), an evaluation. Such a line says where the job *is*
(or was, or will be), never that it advanced: taking it for a step makes a restarted attempt
look as if it trained past its checkpoint. A ``key=value`` line that says what it is
(``event=``, ``type=``, ``phase=`` ...) is a step only when that says step/train/progress.

``parse_progress_json`` reads trainmedic's JSONL progress protocol (one object per line).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from trainmedic.core.badinput import MAX_INT_DIGITS, small_int
from trainmedic.core.logparse.fairseq import parse_fairseq, postfix_updates

MAX_PROGRESS_CHARS = 2048
"""Characters of a line (of its last ``\\r`` segment) that are parsed for progress: real
progress lines are a few hundred; the regexes never see more, so no line costs more."""
_MAX_ITERATION = 10**MAX_INT_DIGITS


@dataclass(frozen=True, slots=True)
class ProgressLine:
    """One progress report. Times in seconds; ``None`` means "not printed", never 0."""

    iteration: int
    loss: float | None = None
    step_time: float | None = None
    compute_time: float | None = None
    wait_time: float | None = None
    samples_per_s: float | None = None
    grad_norm: float | None = None
    elapsed_s: float | None = None  # tqdm: time since the bar started
    label: str = ""  # tqdm: the bar's description ("Epoch 0", "Preparing test set...")
    # A per-epoch bar (Lightning): its count within the epoch, the epoch its label names
    # (None: "Training", no epoch) and the batches per epoch (None: "?").
    epoch_step: int | None = None
    epoch: int | None = None
    epoch_len: int | None = None
    rank: int | None = None  # JSONL protocol only
    time: float | None = None  # JSONL protocol only: Unix seconds


# Every quantifier below has one way to match a run of text (no "\d+\.?\d*" or "\s*x?\s*"
# splits to backtrack over), so a hostile line costs linear time.
_FLOAT = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|NaN|inf|-inf)"
_KV = re.compile(r"(\w+)=(\S+)")
_TRAINER = re.compile(r"(?:^|\s)iter=(\d+)(?:\s|$)")
_MEGATRON = re.compile(r"\biteration\s+(\d+)\s*/\s*\d+\s*\|")
_MEG_FIELDS = {
    "step_time": re.compile(r"elapsed time per iteration \(ms\):\s*" + _FLOAT),
    "loss": re.compile(r"\b(?:lm )?loss:\s*" + _FLOAT),
    "grad_norm": re.compile(r"grad norm:\s*" + _FLOAT),
    "samples_per_s": re.compile(r"samples per second:\s*" + _FLOAT),
}
# The bar's description is the text before the bar (not a leading lazy group: that made a
# line of many "1%|" cost cubic time); the rate and postfix are read from the bracket.
_TQDM = re.compile(r"\d{1,3}%\|[^|]*\|\s*(\d+)/(\d+|\?)\s*\[([\d:]{1,20})<([^\]]{0,1000})\]")
# Lightning's bar counts the batches of one epoch ("Epoch 7: 46/200"), its checkpoints the
# global step ("epoch=7-step=1446.ckpt"): the step is epoch x batches per epoch + the count.
_EPOCH_LABEL = re.compile(r"Epoch (\d{1,9})")
# Lightning's bar resumed mid-epoch: "Training: |          | 51/? [00:00<00:00, 302.95it/s, ...]"
# (only this description: another bar of unknown total may count anything, a dataset's rows).
_LIGHTNING_RESUMED = re.compile(
    r"(?:^|\s)Training: \|[^|]{0,200}\|\s*(\d+)/\?\s*\[([\d:]{1,20})<([^\]]{0,1000})\]"
)
_TQDM_RATE = re.compile(r"[^,]*,\s*" + _FLOAT + r"\s*(it/s|s/it)")
_TQDM_LOSS = re.compile(r"\bloss=" + _FLOAT)
_DICT = re.compile(r"\{'(?:loss|train_loss|eval_loss|grad_norm|learning_rate)'[^{}]*\}")
# The number must not go on as a dotted id: slurmstepd's "*** STEP 1.0 ON node1 CANCELLED"
# is not step 1.
_PLAIN = re.compile(
    r"\b(?:step|iter|iteration)\b\s*(?:[:=#]\s*)?\[?(\d+)(?![.\d])(?:\s*/\s*\d+)?\]?", re.I
)
_PLAIN_LOSS = re.compile(r"\bloss\b\s*(?:[:=]\s*)?" + _FLOAT, re.I)

# What a line *does* when it names an iteration without having trained it. A word used as a
# key or inside a name (``ckpt_s=``, ``eval_loss=``, ``lr_scheduler``, ``data_loader``) does
# not count: the lookarounds reject word characters, ``=`` and a ``.`` before it.
_NOT_A_STEP = re.compile(
    r"(?i)(?<![\w.])(?:resum|restor|continu|(?:re)?load|sav(?:e|i)|checkpoint|ckpt|config|"
    r"args\b|argument|namespace|hparam|hyperparam|setting|scheduler|slurmstepd|srun\b|sbatch|"
    r"traceback|fail|abort|eval|validat|warn)[a-z]*(?![\w=])"
    # "skipping step 860", "will skip to", but not Megatron's "number of skipped iterations"
    r"|(?<![\w.])(?:skip(?:s|ping)?|stop(?:s|ping)?)(?![\w=])"
    # an error message ("RuntimeError: ... at iteration 880"), wherever the word starts
    r"|(?:error|exception)(?![\w=])"
    # a config echo with a dotted leader (Megatron's "  train_iters ........ 1000")
    r"|\s\.{4,}\s"
)
_KV_KIND = re.compile(r"(?<![\w.])(?:event|evt|type|kind|phase|stage|action|what)=([\w.-]+)")
STEP_KINDS = frozenset(
    {"step", "steps", "train", "training", "train_step", "iter", "iteration", "progress"}
    | {"log", "metrics", "stats", "update", "batch"}
)
"""Values of a ``key=value`` line's kind field (``event=step``) that mean a training step."""


def _may_not_be_a_step(lowered: str) -> bool:
    """Whether ``lowered`` holds a substring every line ``_NOT_A_STEP`` or ``_KV_KIND`` matches
    holds (a "skip" or "stop" ending a line aside). Most lines hold none, and a chain of
    ``in`` tests is far cheaper than the regular expressions (or ``any()``); Megatron's step
    lines say "skipped", DeepSpeed's "skipped=": neither is a stem."""
    return (
        "resum" in lowered
        or "restor" in lowered
        or "continu" in lowered
        or "load" in lowered
        or "sav" in lowered
        or "checkpoint" in lowered
        or "ckpt" in lowered
        or "config" in lowered
        or "arg" in lowered
        or "namespace" in lowered
        or "hparam" in lowered
        or "hyperparam" in lowered
        or "setting" in lowered
        or "scheduler" in lowered
        or "slurmstepd" in lowered
        or "srun" in lowered
        or "sbatch" in lowered
        or "skip " in lowered
        or "skipping" in lowered
        or "stop " in lowered
        or "stopping" in lowered
        or "traceback" in lowered
        or "fail" in lowered
        or "abort" in lowered
        or "eval" in lowered
        or "validat" in lowered
        or "warn" in lowered
        or "error" in lowered
        or "exception" in lowered
        or "...." in lowered
        or "event=" in lowered
        or "evt=" in lowered
        or "type=" in lowered
        or "kind=" in lowered
        or "phase=" in lowered
        or "stage=" in lowered
        or "action=" in lowered
        or "what=" in lowered
    )


def is_not_a_step(body: str) -> bool:
    """True when a line that names an iteration is no step of training (see module doc)."""
    lowered = body.lower()
    if not _may_not_be_a_step(lowered):
        return False
    kind = _KV_KIND.search(body)
    if kind is not None and kind.group(1).lower() not in STEP_KINDS:
        return True
    return _NOT_A_STEP.search(body) is not None


_TRAINER_KEYS = {
    "loss": "loss",
    "step_s": "step_time",
    "compute_s": "compute_time",
    "wait_s": "wait_time",
    "samples_per_s": "samples_per_s",
    "grad_norm": "grad_norm",
}


def _num(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text.rstrip(",;|"))
    except ValueError:
        return None


def _clock(text: str) -> float | None:
    """``[1:02:03`` / ``29:02`` -> seconds."""
    total = 0.0
    for part in text.split(":"):
        if not part.isdigit() or len(part) > 6:
            return None
        total = total * 60 + int(part)
    return total


def parse_progress(body: str) -> ProgressLine | None:
    """The progress a line reports, or ``None`` when it reports none (or reports an
    iteration of more than 18 digits, which is counted as bad input)."""
    if len(body) > MAX_PROGRESS_CHARS:
        body = body[body.rfind("\r") + 1 :][:MAX_PROGRESS_CHARS]
    m = _TRAINER.search(body)
    if m and is_not_a_step(body):
        return None
    if m:
        iteration = small_int(m.group(1))
        if iteration is None:
            return None
        fields: dict[str, float | None] = {}
        for key, value in _KV.findall(body):
            if key in _TRAINER_KEYS:
                fields[_TRAINER_KEYS[key]] = _num(value)
        return ProgressLine(iteration=iteration, **fields)  # type: ignore[arg-type]
    m = _MEGATRON.search(body)
    if m:
        iteration = small_int(m.group(1))
        return None if iteration is None else _megatron(iteration, body)
    if "%|" in body:
        return _tqdm(body)
    if "Training: |" in body:
        return _lightning_resumed(body)
    if "{'" in body:
        return _hf_dict(body)
    if "num_updates" in body:
        return _fairseq(body)
    m = _PLAIN.search(body)
    if m and not is_not_a_step(body):
        iteration = small_int(m.group(1))
        if iteration is None:
            return None
        lm = _PLAIN_LOSS.search(body, m.end())
        return ProgressLine(iteration=iteration, loss=_num(lm.group(1)) if lm else None)
    return None


def _fairseq(body: str) -> ProgressLine | None:
    found = parse_fairseq(body)
    if found is None or is_not_a_step(body):
        return None
    iteration, loss, step_time, grad_norm = found
    return ProgressLine(iteration=iteration, loss=loss, step_time=step_time, grad_norm=grad_norm)


def _megatron(iteration: int, body: str) -> ProgressLine:
    found = {}
    for name, pattern in _MEG_FIELDS.items():
        fm = pattern.search(body)
        found[name] = _num(fm.group(1)) if fm else None
    step_ms = found["step_time"]
    return ProgressLine(
        iteration=iteration,
        loss=found["loss"],
        step_time=step_ms / 1000.0 if step_ms is not None else None,
        grad_norm=found["grad_norm"],
        samples_per_s=found["samples_per_s"],
    )


def _tqdm(body: str) -> ProgressLine | None:
    # A carriage-return-updated bar leaves many states on one line: the last one counts.
    text = body[body.rfind("\r") + 1 :] if "\r" in body else body
    matches = list(_TQDM.finditer(text))
    if not matches:
        return None
    m = matches[-1]
    iteration = small_int(m.group(1))
    if not iteration:
        return None  # none, too long, or a bar's first draw (0/N): no step was made yet
    step_time, rest = _rate_and_rest(m.group(4))
    lm = _TQDM_LOSS.search(rest)
    before = text[matches[-2].end() if len(matches) > 1 else 0 : m.start()]
    label = before.strip().rstrip(":").strip()
    updates = postfix_updates(rest)
    if updates is not None:  # fairseq's bar: it counts within the epoch, num_updates across
        if not updates:  # epochs; 0 updates is no step made yet (as a bar's first draw)
            return None
        return ProgressLine(
            iteration=updates,
            step_time=step_time,
            loss=_num(lm.group(1)) if lm else None,
            elapsed_s=_clock(m.group(3)),
            label=label[-80:],
        )
    epoch = _EPOCH_LABEL.fullmatch(label)
    per_epoch = small_int(m.group(2)) if m.group(2) != "?" else None
    if epoch is not None and per_epoch:
        count, number = iteration, int(epoch.group(1))
        return ProgressLine(
            iteration=number * per_epoch + count,
            step_time=step_time,
            loss=_num(lm.group(1)) if lm else None,
            elapsed_s=_clock(m.group(3)),
            label=label[-80:],
            epoch_step=count,
            epoch=number,
            epoch_len=per_epoch,
        )
    return ProgressLine(
        iteration=iteration,
        step_time=step_time,
        loss=_num(lm.group(1)) if lm else None,
        elapsed_s=_clock(m.group(3)),
        label=label[-80:],
    )


def _rate_and_rest(rest: str) -> tuple[float | None, str]:
    """A bar's step time (from ``it/s`` or ``s/it``) and the postfix after it."""
    rm = _TQDM_RATE.match(rest)
    if rm:
        rate, unit = _num(rm.group(1)), rm.group(2)
        step_time = None
        if rate is not None and rate > 0:
            step_time = rate if unit == "s/it" else 1.0 / rate
        return step_time, rest[rm.end() :]
    return None, rest[rest.find(",") :] if "," in rest else ""


def _lightning_resumed(body: str) -> ProgressLine | None:
    """Lightning's bar of a mid-epoch resume: a count within an epoch it does not name, so
    ``iteration`` is that count until the engine places it (``EpochBarClock``)."""
    text = body[body.rfind("\r") + 1 :] if "\r" in body else body
    m = _LIGHTNING_RESUMED.search(text)
    if m is None:
        return None
    count = small_int(m.group(1))
    if not count:
        return None  # the bar's first draw (0/?): no step yet
    step_time, rest = _rate_and_rest(m.group(3))
    lm = _TQDM_LOSS.search(rest)
    return ProgressLine(
        iteration=count,
        step_time=step_time,
        loss=_num(lm.group(1)) if lm else None,
        elapsed_s=_clock(m.group(2)),
        label="Training",
        epoch_step=count,
    )


def _hf_dict(body: str) -> ProgressLine | None:
    m = _DICT.search(body)
    if not m:
        return None
    keys = dict(re.findall(r"'(\w+)':\s*'?" + _FLOAT, m.group(0)))
    step = _num(keys.get("step") or keys.get("global_step"))
    if step is None or not 0 <= step < _MAX_ITERATION:  # nan, inf and 1e400 are no step
        return None
    return ProgressLine(
        iteration=int(step),
        loss=_num(keys.get("loss") or keys.get("train_loss")),
        grad_norm=_num(keys.get("grad_norm")),
    )


def parse_progress_json(line: str) -> ProgressLine | None:
    """One line of the JSONL progress protocol: ``{"iteration": 12, "loss": 0.5, ...}``."""
    text = line.strip()
    if not text.startswith("{") or '"iteration"' not in text:
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    iteration = obj.get("iteration")
    if not isinstance(iteration, int) or isinstance(iteration, bool):
        return None
    if abs(iteration) >= _MAX_ITERATION:
        return None  # a 2**63 step would overflow the store's integer column

    def real(key: str) -> float | None:
        value = obj.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)

    rank = obj.get("rank")
    if isinstance(rank, int) and abs(rank) >= _MAX_ITERATION:
        rank = None
    return ProgressLine(
        iteration=iteration,
        loss=real("loss"),
        step_time=real("step_time"),
        compute_time=real("compute_time"),
        wait_time=real("wait_time"),
        samples_per_s=real("samples_per_s"),
        grad_norm=real("grad_norm"),
        rank=rank if isinstance(rank, int) and not isinstance(rank, bool) else None,
        time=real("time"),
    )


def is_finite_loss(progress: ProgressLine) -> bool:
    """False when the line reports a NaN or infinite loss or grad norm."""
    for value in (progress.loss, progress.grad_norm):
        if value is not None and not math.isfinite(value):
            return False
    return True
