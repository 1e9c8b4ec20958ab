"""The learned evidence layer: a text classifier speaks only where the layers say nothing sure.

Below the catalogue, the mechanisms and the hand-written evidence cues, a classifier trained on
the labelled real logs (``learned_model.py`` over ``learned_text.py``'s features; the weights
are data, ``learned_model.json``, written by ``python -m trainmedic.offline.train_evidence``)
reads the log's words. It is used in these places only:

* a failure the layers could not name (category unknown) because its lines are unknown to
  every rule (the evidence layer's unnamed failure lines, or teardown noise alone) gets the
  classifier's likeliest failure category, when that is not "unknown" itself. An unknown a
  mechanism or a cascade concluded on purpose (a wait on another process, a peer that
  vanished, a log cut short) is left alone: its words are the cascade's, not the cause's;
* a log the layers found no failure in is called a failure only when its words are more a
  failure's than those of any healthy log of the training sets were, each scored by a model
  that never saw its set (``failure_above``, chosen by leave-one-set-out cross-validation);
  off by default (``CALL_FAILURES``, see there);
* a failure the layers named only as a guess (under ``GUESS_BELOW``) is renamed when the
  classifier reads another failure class by a majority; off (``SECOND_OPINION``, see there,
  and its replay in ``offline/second_opinion.py``).

Its verdicts are guesses: confidence at most ``LEARNED_CONFIDENCE`` (under the policy's stop
threshold: restart, never stop or drain), no node implicated, and the basis says
"learned evidence layer". Off unless ``ADOPTED`` (see the cross-validation in
``offline/crossval.py``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources

from trainmedic.core.attribute.learned_model import HEALTHY, TextModel
from trainmedic.core.attribute.learned_text import features
from trainmedic.core.model import Category, Implicated, Kind, Verdict

ADOPTED = True
"""Whether ``attribute`` consults the packaged model to name unknown failures (measured by
leave-one-set-out cross-validation, ``offline/crossval.py``: more right, no safety lost)."""

CALL_FAILURES = False
"""Whether it may also call a failure in a log the layers found none in. Off: in
leave-one-set-out cross-validation it called 5 of 70 such logs failures, no healthy one
among them, but only 2 were named right (1 of them high+medium), and the threshold rests on
45 healthy logs: too thin a gain for the one promise a guess must not break."""

SECOND_OPINION = False
"""Whether the classifier may also overrule a failure the layers named only as a guess
(confidence under ``GUESS_BELOW``) when it reads the log as another failure class with more
than ``OVERRULE_SHARE`` of the failure classes' probability. Off. Replayed on logs neither
layer had seen (``offline/second_opinion.py``: each batch's recorded first-sight verdict, a
model trained on the batches before it; ``trainmedic eval --replay-second-opinion
tests/data/realworld``) it overruled 38 of 400 high+medium verdicts, 18 to the right class
where 11 had been right (238 -> 245): a small gain. Against it: on the one-line wordings of the
written tests (a modprobe failure, a BeeGFS client error, sinfo's "not responding") the words
of one line are too few for the classifier, which overruled 59 correct guesses; a log's length
is no safe gate without data to set it on."""
GUESS_BELOW = 0.5
"""The policy's own line: under it a verdict is a guess (restart, never stop or drain)."""
OVERRULE_SHARE = 0.5

LEARNED_CONFIDENCE = 0.45
"""The most the learned layer ever claims."""
BASE_CONFIDENCE = 0.2
SHARE_WEIGHT = 0.1
"""Confidence is 0.2 to 0.3 by the likeliest class's share: in cross-validation about a third of
the unknown failures it named were named right (the reliability table)."""


@dataclass(frozen=True, slots=True)
class LearnedModel:
    text: TextModel
    failure_above: float
    """``TextModel.failure_score`` above which a log the layers found healthy is a failure."""
    trained_on: Mapping[str, str] = field(default_factory=dict)  # set -> digest of its logs

    def to_json(self) -> dict[str, object]:
        return {
            "failure_above": self.failure_above,
            "trained_on": dict(sorted(self.trained_on.items())),
            **self.text.to_json(),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, object]) -> LearnedModel:
        above, trained = obj["failure_above"], obj.get("trained_on", {})
        if not isinstance(above, int | float) or not isinstance(trained, dict):
            raise ValueError("learned model: failure_above or trained_on is malformed")
        return cls(
            TextModel.from_json(obj), float(above), {str(k): str(v) for k, v in trained.items()}
        )


@functools.cache
def packaged_model() -> LearnedModel:
    text = resources.files("trainmedic.core.attribute").joinpath("learned_model.json")
    return LearnedModel.from_json(json.loads(text.read_text("utf-8")))


def _failure_guess(model: LearnedModel, feats: frozenset[str]) -> tuple[str, float] | None:
    """The likeliest failure class and its probability among the failure classes."""
    post = model.text.posterior(feats)
    failure = {c: p for c, p in post.items() if c != HEALTHY}
    if not failure:
        return None
    mass = sum(failure.values()) or 1.0
    best = max(sorted(failure), key=lambda c: failure[c])
    return best, failure[best] / mass


def _confidence(share: float) -> float:
    return round(min(LEARNED_CONFIDENCE, BASE_CONFIDENCE + SHARE_WEIGHT * share), 3)


def _renamed(verdict: Verdict, best: str, share: float, said: str) -> Verdict:
    """``verdict`` in the classifier's class, at its confidence, implicating no node."""
    return replace(
        verdict,
        category=Category(best),
        confidence=_confidence(share),
        implicated=replace(verdict.implicated, nodes=()),
        basis=f"{verdict.basis}; {said}",
    )


NAMEABLE = ("evidence:", "catalogue: only teardown noise")
"""Bases of the unknown verdicts the learned layer may name (``verdict.py``'s wording)."""


def apply_learned(
    verdict: Verdict,
    lines: Sequence[str],
    model: LearnedModel | None,
    *,
    call_failures: bool = CALL_FAILURES,
    second_opinion: bool = SECOND_OPINION,
) -> Verdict:
    """``verdict`` unchanged, or named / called a failure by the classifier (see the module)."""
    unnamed = (
        verdict.failure
        and verdict.category is Category.UNKNOWN
        and verdict.basis.startswith(NAMEABLE)
    )
    guessed = (
        second_opinion
        and verdict.failure
        and verdict.category is not Category.UNKNOWN
        and verdict.confidence < GUESS_BELOW
    )
    if model is None or not lines:
        return verdict
    if not (unnamed or guessed or (call_failures and not verdict.failure)):
        return verdict
    feats = features(lines)
    guess = _failure_guess(model, feats)
    if guess is None:
        return verdict
    best, share = guess
    basis = f"learned evidence layer: the log's words read as {best} (p={share:.2f} among failures"
    if guessed:
        if best in (str(Category.UNKNOWN), str(verdict.category)) or share <= OVERRULE_SHARE:
            return verdict
        said = f"a guess ({verdict.category}, {verdict.confidence:.2f}) overruled by {basis})"
        return _renamed(verdict, best, share, said)
    if unnamed:
        if best == str(Category.UNKNOWN):
            return verdict
        return _renamed(verdict, best, share, f"named by {basis})")
    score = model.text.failure_score(feats)
    if score <= model.failure_above:
        return verdict
    return Verdict(
        failure=True,
        kind=Kind.CRASH,
        category=Category(best),
        confidence=_confidence(share),
        implicated=Implicated(),
        basis=f"{basis}; its words a failure's by {score:.2f} nats each, over the threshold "
        f"{model.failure_above:.2f}); no failure line any rule knows",
    )


def learned_fallback(verdict: Verdict, lines: Sequence[str]) -> Verdict:
    """The hook ``attribute`` calls last: the packaged model when adopted."""
    return apply_learned(verdict, lines, packaged_model() if ADOPTED and lines else None)
