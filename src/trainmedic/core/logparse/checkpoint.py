"""Checkpoint-saved lines: the iteration a restart would resume from.

Recognised: ``saved checkpoint at iteration N`` (Megatron prints ``successfully saved
checkpoint at iteration       N to ...``), trainmedic's trainer ``checkpoint saved iter=N
path=...``, HF Trainer ``Saving model checkpoint to out/checkpoint-500``, DeepSpeed
``.../global_step500/...``, Lightning ``saving model to '.../epoch=0-step=500.ckpt'`` and generic
``saved checkpoint ... step N`` phrasings, fairseq's ``saved checkpoint .../checkpoint3.pt
(epoch 3 @ 1500 updates, score 3.2) (writing took 2.1 seconds)`` (its updates, the count its
progress lines report), and a ``key=value`` line whose kind says it saved
one (``event=ckpt iter=900 path=...``, ``type=checkpoint step=900``).
"""

from __future__ import annotations

import re

from trainmedic.core.badinput import small_int

MAX_CHECKPOINT_CHARS = 1024
"""Characters of a line searched for a checkpoint save (real ones are a few hundred)."""
# The gaps between phrase and number are bounded (``.{0,256}?``, not ``.*?``): an unbounded
# lazy gap made a line repeating "checkpoint saved" cost quadratic time.
_PATTERNS = (
    # fairseq names its file by epoch (checkpoint3.pt) and the step in "(epoch E @ N updates":
    # first, so that a path holding "step" is not read instead.
    re.compile(r"sav(?:ed?|ing) checkpoint\b.{0,256}?\(epoch \d{1,9} @ (\d+) updates", re.I),
    re.compile(r"saved checkpoint (?:at|for) (?:iteration|iter|step)\s*(?:[:=]\s*)?(\d+)", re.I),
    re.compile(r"checkpoint saved\b.{0,256}?\b(?:iter|iteration|step)\s*[=: ]\s*(\d+)", re.I),
    re.compile(r"saving model checkpoint to \S{0,256}?checkpoint-(\d+)", re.I),
    re.compile(r"(?:saving|saved)\b.{0,256}?\bglobal_step(\d+)", re.I),
    re.compile(r"checkpoint global_step(\d+) is ready", re.I),
    re.compile(
        r"(?:saving model to|saving checkpoint|saved checkpoint)\b.{0,256}?\bstep[=_](\d+)", re.I
    ),
    re.compile(
        r"(?:saved|saving|wrote) checkpoint\b.{0,256}?\b(?:iteration|iter|step)\s*(?:[:=#]\s*)?"
        r"(\d+)",
        re.I,
    ),
)
_KV_SAVED = re.compile(
    r"(?i)(?<![\w.])(?:event|evt|type|kind|action|what)="
    r"(?:ckpt|checkpoint|save|saved|ckpt_saved|checkpoint_saved|save_checkpoint)(?![\w.-])"
)
_KV_ITER = re.compile(r"(?i)(?<![\w.])(?:iter|iteration|step|global_step)=(\d+)(?![\w.])")


def parse_checkpoint(body: str) -> int | None:
    """The iteration of a completed (or started) checkpoint save named by ``body``."""
    body = body[:MAX_CHECKPOINT_CHARS]
    lowered = body.lower()
    if (
        "checkpoint" not in lowered
        and "saving model" not in lowered
        and "global_step" not in lowered
        and "ckpt" not in lowered
        and "save" not in lowered
    ):
        return None
    if _KV_SAVED.search(body):
        m = _KV_ITER.search(body)
        return int(m.group(1)) if m else None
    for pattern in _PATTERNS:
        m = pattern.search(body)
        if m:
            return small_int(m.group(1))
    return None
