"""``TimelineTracker.candidates`` (a run of lines at once, visiting only those it keeps) leaves
the tracker exactly as ``candidate`` line by line does: the same points, thinning stride,
held lines and timeline, whatever the run sizes and whichever lines fail to parse."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from trainmedic.core.logparse.timeline import Parsed, TimelineTracker


def _state(tracker: TimelineTracker) -> str:
    """Everything it holds (repr: a NaN loss equals itself only as text)."""
    return repr(
        (tracker._points, tracker._pending, list(tracker._last), tracker._stride, tracker._seen)
    )


@settings(max_examples=150, deadline=None)
@given(
    runs=st.lists(
        st.tuples(st.integers(1, 900), st.integers(0, 9), st.integers(0, 9)),
        min_size=1,
        max_size=8,
    )
)
def test_a_run_of_candidates_is_taken_as_one_by_one(runs: list[tuple[int, int, int]]) -> None:
    """Each run: (size, every how many lines one does not parse, one is read unparsed)."""
    one, many = TimelineTracker(), TimelineTracker()
    line = 1
    for size, junk, unparsed in runs:
        texts: list[str] = []
        parsed: list[Parsed | None] = []
        for k in range(size):
            n = line + k
            bad = junk and n % (junk + 2) == 0
            texts.append(f"step junk {n}" if bad else f"iter={n} loss=0.5")
            known = not bad and not (unparsed and n % (unparsed + 2) == 0)
            parsed.append((n, 0.5, None, None) if known else None)
        for k, text in enumerate(texts):
            one.candidate(line + k, text, parsed[k])
        many.candidates(line, texts, parsed)
        line += size
        assert _state(many) == _state(one)
    assert repr(many.timeline(line)) == repr(one.timeline(line))
