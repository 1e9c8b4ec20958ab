"""``parse_plain_block`` reads a block of lines exactly as ``parse_plain`` reads each line.

The block reader checks the lines with one regex and reads each field with one more (no
object per line); whatever it gives, a block of plain lines of one kind or None, must be what
the per-line reader implies: None when some line is not plain (or no date) or the lines are
not all of one kind, else every field column by column as ``parse_plain`` read it.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from trainmedic.core.logparse.plain import PlainColumns, parse_plain, parse_plain_block


def by_line(lines: list[str]) -> PlainColumns | None:
    steps = [parse_plain(line) for line in lines]
    if not steps or any(s is None for s in steps):
        return None
    plain = [s for s in steps if s is not None]
    if len({s.kind for s in plain}) > 1:
        return None
    first = plain[0]
    with_compute, with_rate = first.compute_time is not None, first.samples_per_s is not None
    return PlainColumns(
        kind=first.kind,
        rank=first.rank,
        node=first.node,
        stamps=tuple(s.stamp for s in plain),
        iterations=tuple(s.iteration for s in plain),
        losses=tuple(s.loss for s in plain),
        step_times=tuple(s.step_time for s in plain),
        compute_times=tuple(s.compute_time or 0.0 for s in plain) if with_compute else None,
        wait_times=tuple(s.wait_time or 0.0 for s in plain) if with_compute else None,
        samples_per_s=tuple(s.samples_per_s or 0.0 for s in plain) if with_rate else None,
        texts=tuple(lines),
    )


numbers = st.sampled_from(["0.5", "0.01", "12.25", "3.000001", "1e5", "nan", "7."])
stamps = st.sampled_from(
    [
        "2026-12-01T22:53:34.000Z",
        "2026-12-01T22:53:35.000Z",
        "2026-12-01T22:53:35.5Z",
        "2026-12-01T22:53:35.123456789Z",
        "2026-13-01T22:53:35.000Z",  # no date
        "2026-12-01 22:53:35.000Z",
    ]
)


@st.composite
def plain_lines(draw: st.DrawFn) -> str:
    stamp = draw(stamps)
    rank = draw(st.sampled_from(["0", "1", "12", "x"]))
    node = draw(st.sampled_from(["n1", "n12", "Zeta.9", "node-3_a"]))
    line = f"{stamp} [rank{rank}] node={node} iter={draw(st.integers(0, 10**6))}"
    line += f" loss={draw(numbers)} step_s={draw(numbers)}"
    if draw(st.booleans()):
        line += f" compute_s={draw(numbers)} wait_s={draw(numbers)}"
    if draw(st.booleans()):
        line += f" samples_per_s={draw(numbers)}"
    return line + draw(st.sampled_from(["", "", "", " extra", "\r"]))


@settings(max_examples=400, deadline=None)
@given(st.lists(plain_lines(), min_size=1, max_size=6), st.data())
def test_a_block_reads_as_its_lines(lines: list[str], data: st.DataObject) -> None:
    # Mostly one kind (rank, node, optional fields alike), so that blocks are often read.
    if data.draw(st.booleans()):
        head = lines[0].split(" iter=", 1)[0].split(" ", 1)[1]
        lines = [
            line.split(" ", 1)[0] + " " + head + " iter=" + line.split(" iter=", 1)[1]
            for line in lines
        ]
        tail = lines[0].split(" step_s=", 1)[1].split(" ", 1)
        fields = "" if len(tail) == 1 else " " + tail[1]
        lines = [line.split(" step_s=", 1)[0] + " step_s=0.25" + fields for line in lines]
    assert parse_plain_block("\n".join(lines), len(lines)) == by_line(lines)


def test_a_block_of_the_soak_writers_lines_is_read() -> None:
    lines = [
        f"2026-12-01T22:53:3{i // 6}.000Z [rank3] node=n3 iter={i} loss=0.5 step_s=0.01"
        for i in range(12)
    ]
    block = parse_plain_block("\n".join(lines), 12)
    assert block is not None
    assert block == by_line(lines)
    assert block.iterations == tuple(range(12))
    assert parse_plain_block("\n".join(lines), 11) is None
