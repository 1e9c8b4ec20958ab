"""The monitor-mode scorecard: did operators agree with the advice, per category and action?

For each advice an operator records whether they agreed and what they actually did. The
latest answer per advice counts (an operator may correct themselves). Rates are ``None``
where nobody answered, never 0, so a team decides from numbers when to enable action mode
for which categories.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from trainmedic.core.accounting.facts import FeedbackFacts


@dataclass(frozen=True, slots=True)
class Agreement:
    key: str  # a category or an advised action
    answered: int
    agreed: int
    same_action: int  # the operator did what was advised

    @property
    def agreement(self) -> float | None:
        return self.agreed / self.answered if self.answered else None

    @property
    def action_match(self) -> float | None:
        return self.same_action / self.answered if self.answered else None


@dataclass(frozen=True, slots=True)
class Scorecard:
    answered: int
    overall: Agreement
    by_category: tuple[Agreement, ...]
    by_action: tuple[Agreement, ...]


def latest_answers(feedback: Iterable[FeedbackFacts]) -> list[FeedbackFacts]:
    latest: dict[int, FeedbackFacts] = {}
    for answer in sorted(feedback, key=lambda f: f.time):
        latest[answer.advice_id] = answer
    return sorted(latest.values(), key=lambda f: f.advice_id)


def _agreement(key: str, answers: list[FeedbackFacts]) -> Agreement:
    return Agreement(
        key=key,
        answered=len(answers),
        agreed=sum(1 for a in answers if a.agree),
        same_action=sum(
            1
            for a in answers
            if a.advised_action is not None and a.action_taken == a.advised_action.value
        ),
    )


def _grouped(answers: list[FeedbackFacts], key_of: str) -> tuple[Agreement, ...]:
    groups: dict[str, list[FeedbackFacts]] = {}
    for answer in answers:
        value = getattr(answer, key_of)
        key = value.value if value is not None else "unknown"
        groups.setdefault(key, []).append(answer)
    return tuple(_agreement(k, v) for k, v in sorted(groups.items()))


def scorecard(feedback: Iterable[FeedbackFacts]) -> Scorecard:
    answers = latest_answers(feedback)
    return Scorecard(
        answered=len(answers),
        overall=_agreement("all", answers),
        by_category=_grouped(answers, "category"),
        by_action=_grouped(answers, "advised_action"),
    )
