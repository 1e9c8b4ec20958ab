"""fairseq's training progress (fairseq2 and metaseq print the same way).

fairseq names no "iter" or "step": its progress is the ``num_updates`` it reports, in two
wordings (after any prefix, the logger's ``| INFO | train_inner |`` or hydra's
``[fairseq.trainer][INFO] -``):

* every log interval (``train_inner``): ``epoch 001:    100 / 1563 loss=9.872, nll_loss=9.012,
  ..., wps=30506.8, ups=2.39, ..., num_updates=100, lr=1.25e-05, gnorm=2.61, ...``
* each epoch's summary (``train``): ``epoch 002 | loss 9.803 | ... | ups 0.07 | ...
  | num_updates 695 | ... | gnorm 55.005 | ...``

The step is ``num_updates`` (the optimizer's, counted across epochs, the number checkpoints are
named by), never the count within the epoch (``100 / 1563``), which starts over each epoch.
``ups`` (updates per second) gives the step time as a tqdm bar's ``it/s`` does; ``wps`` counts
tokens, not samples, so no ``samples_per_s`` is read from it.

With ``--log-format tqdm`` the same statistics are the bar's postfix (``epoch 002:  40%|...|
200/500 [01:02<01:33, 3.2it/s, loss=9.1, ..., num_updates=700, lr=...]``): the bar counts
within the epoch, ``num_updates`` across epochs, and the step is again ``num_updates``
(``postfix_updates``).

With ``--log-format json`` each is one JSON object after the logger's prefix: ``| train_inner |
{"epoch": 1, "update": 0.5, "loss": "9.8", ..., "num_updates": "100", ...}`` and the epoch's
``| train | {"epoch": 21, "train_loss": "816.9", ..., "train_num_updates": "643", ...}``; the
validation's keys start with ``valid_`` and its tag is ``| valid |``.

A validation or test pass reports the same ``num_updates`` (``| valid | epoch 002 | valid on
'valid' subset | loss 9.393 | ... | num_updates 695``): it is no step, so a validation after
training stopped is not taken for progress, nor for a new iteration.
"""

from __future__ import annotations

import re

from trainmedic.core.badinput import small_int

_FLOAT = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|NaN|inf|-inf)"
# Each quantifier matches a run one way only (linear time, as progress.py's).
_EPOCH = re.compile(r"(?<![\w.])epoch\s+\d{1,9}(?::|\s*\|)")
_UPDATES = re.compile(r"(?<![\w.])num_updates(?:=|\s+)(\d+)(?![\w.])")
# The JSON format quotes every value; the epoch summary prefixes its keys with "train_".
_JSON_EPOCH = re.compile(r'"epoch":\s*\d{1,9}[,}]')
_JSON_UPDATES = re.compile(r'"(?:train_)?num_updates":\s*"?(\d+)"?[,}]')
_JSON_FIELDS = {
    name: re.compile(r'"(?:train_)?' + name + r'":\s*"?' + _FLOAT)
    for name in ("loss", "ups", "gnorm")
}
_FIELDS = {
    "loss": re.compile(r"(?<![\w.])loss(?:=|\s+)" + _FLOAT),
    "ups": re.compile(r"(?<![\w.])ups(?:=|\s+)" + _FLOAT),
    "gnorm": re.compile(r"(?<![\w.])gnorm(?:=|\s+)" + _FLOAT),
}
# A validation or test pass: its logger tag (``| valid |``, ``| valid_small |``, ``| test |``)
# or its "valid on 'X' subset" (older fairseq and hydra print no tag). A field named after
# the pass (``valid_loss=``) is no tag: the lookahead rejects ``=``.
_NOT_TRAINING = re.compile(r"(?<![\w.])(?:valid|test)\w*(?![\w=])|\bsubset\b")


def is_fairseq_candidate(text: str) -> bool:
    """Whether ``text`` may be a fairseq training step: it reports ``num_updates`` and is no
    validation or test pass. Reads no digit, so it holds for every line of one shape."""
    return "num_updates" in text and _NOT_TRAINING.search(text) is None


def parse_fairseq(body: str) -> tuple[int, float | None, float | None, float | None] | None:
    """``(num_updates, loss, step time, grad norm)`` of a fairseq training line, else
    ``None`` (not fairseq's, a validation or test pass, or more than 18 digits of updates)."""
    if not is_fairseq_candidate(body):
        return None
    fields = _FIELDS
    epoch = _EPOCH.search(body)
    if epoch is None:
        epoch, fields = _JSON_EPOCH.search(body), _JSON_FIELDS
        if epoch is None:
            return None
        updates = _JSON_UPDATES.search(body)  # a JSON object's keys come in any order
    else:
        updates = _UPDATES.search(body, epoch.end())
    if updates is None:
        return None
    iteration = small_int(updates.group(1))
    if iteration is None:
        return None
    found: dict[str, float | None] = {}
    start = epoch.end() if fields is _FIELDS else 0
    for name, pattern in fields.items():
        m = pattern.search(body, start)
        found[name] = _num(m.group(1)) if m else None
    ups = found["ups"]
    # fairseq rounds ups to two decimals: "ups=0.00" is a slow job, not an infinite step.
    step_time = 1.0 / ups if ups is not None and ups > 0 else None
    return iteration, found["loss"], step_time, found["gnorm"]


def postfix_updates(postfix: str) -> int | None:
    """fairseq's ``num_updates`` in a progress bar's postfix (``--log-format tqdm``), else
    ``None``."""
    m = _UPDATES.search(postfix) if "num_updates" in postfix else None
    return small_int(m.group(1)) if m else None


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
