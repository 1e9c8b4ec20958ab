"""``TimelineTracker.candidates`` (a run of lines at once, visiting only those it keeps) leaves
the tracker exactly as ``candidate`` line by line does: the same points, thinning stride,
held lines and timeline, whatever the run sizes and whichever lines fail to parse."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from trainmedic.core.logparse.timeline import Parsed, TimelineTracker


def _state(tracker: TimelineTracker, lines: int) -> tuple[object, ...]:
    return (
        repr(tracker.timeline(lines)),  # repr: a NaN loss equals itself only as text
        tracker._stride,
        tracker._seen,
    )


@settings(max_examples=150, deadline=None)
@given(
    runs=st.lists(
        st.lists(st.sampled_from(["plain", "text", "junk"]), min_size=1, max_size=700),
        min_size=1,
        max_size=8,
    )
)
def test_a_run_of_candidates_is_taken_as_one_by_one(runs: list[list[str]]) -> None:
    one, many = TimelineTracker(), TimelineTracker()
    line = 1
    for run in runs:
        texts: list[str] = []
        parsed: list[Parsed | None] = []
        for k, kind in enumerate(run):
            n = line + k
            texts.append(f"iter={n} loss=0.5" if kind != "junk" else f"step junk {n}")
            parsed.append((n, 0.5, None, None) if kind == "plain" else None)
        for k, text in enumerate(texts):
            one.candidate(line + k, text, parsed[k])
        many.candidates(line, texts, parsed)
        line += len(run)
        assert _state(many, line) == _state(one, line)
