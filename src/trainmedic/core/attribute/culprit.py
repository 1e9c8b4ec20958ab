"""Which rank started it, when every rank reports a failure.

When one rank crashes or stalls, every other rank soon prints a timeout or "closed by peer",
and torchrun names whichever failure it *observed* first, often an innocent rank. The
culprit is, in order of trust:

1. the rank of the root-cause event, when there is one;
2. the first entry of torchrun's failure table whose exit is not a SIGTERM torchrun sent
   (earliest ``time``, a SIGKILL first within the same second, then order in the log);
3. the one rank that did not time out while the others did;
4. the rank whose last completed collective is the lowest (it fell behind).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from trainmedic.core.logparse.elastic import SIGKILL_EXITS, ChildFailure
from trainmedic.core.model import Event

_SEQ = re.compile(r"SeqNum=(\d+)")
_LAST_COMPLETED = re.compile(r"last completed (?:NCCL )?work:\s*(-?\d+)", re.I)
_RANK_IN_TEXT = re.compile(r"\[Rank (\d+)\]|\brank[ :=]+(\d+)\b", re.I)


@dataclass(frozen=True, slots=True)
class Culprit:
    rank: int | None
    host: str | None
    basis: str


def collective_position(text: str) -> int | None:
    """The last completed (or the timed-out) collective's sequence number named by a line."""
    m = _LAST_COMPLETED.search(text)
    if m:
        return int(m.group(1))
    m = _SEQ.search(text)
    return int(m.group(1)) - 1 if m else None


SEQNUM_SLACK = 16
"""SeqNums of one group's stalled works may differ by this many (or a quarter of the larger):
ranks that queued a few asynchronous works more than their peers before the group stalled."""


def one_sequence(seqnums: Sequence[int]) -> bool:
    """Whether the timed-out works' SeqNums can be positions in one group's sequence. Every
    member of a group makes each of its collectives, so the ranks of one group that time out
    wait at (nearly) one SeqNum, a desync included. Counts far apart (20 thousand against 370
    thousand) are different groups' counters (a tensor-parallel and a data-parallel group on
    lines that name no PG): neither their types nor their positions say anything of each
    other."""
    if len(seqnums) < 2:
        return True
    high = max(seqnums)
    return high - min(seqnums) <= max(SEQNUM_SLACK, high // 4)


def event_rank(event: Event) -> int | None:
    if event.rank is not None:
        return event.rank
    m = _RANK_IN_TEXT.search(event.text)
    if m:
        return int(m.group(1) or m.group(2))
    return None


def first_real_failure(failures: Iterable[ChildFailure]) -> ChildFailure | None:
    """The earliest failure-table entry that is not a SIGTERM victim."""
    real = [f for f in failures if f.exitcode is not None and not f.sigterm_victim]
    if not real:
        return None
    # torchrun's time field sorts as text ("2024-09-11_09:17:37"); entries without one last.
    # Within one second a SIGKILL comes first: torchrun's own teardown sends SIGTERM and
    # escalates to SIGKILL only after its grace period (30 s), so a SIGKILL in the same second
    # as another child's exit came from outside the job (the OOM killer, an admin), and the
    # other child's exit 1 is what losing that peer did to it.
    return min(
        real,
        key=lambda f: (f.time == "", f.time, not f.time or f.exitcode not in SIGKILL_EXITS, f.line),
    )


def find_culprit(
    root: Event | None,
    timeouts: Sequence[Event],
    failures: Sequence[ChildFailure],
    ranks_seen: Iterable[int] = (),
) -> Culprit:
    if root is not None:
        rank = event_rank(root)
        if rank is not None:
            return Culprit(rank, root.node, f"rank {rank} printed the root cause")
    first = first_real_failure(failures)
    if first is not None and first.rank is None and first.local_rank is not None:
        # Only torchrun's "failed (exitcode ...) local_rank: N" line: a local rank is not a
        # global one, so it is named in the basis but not returned as the culprit rank.
        return Culprit(
            None,
            first.host,
            f"local rank {first.local_rank} is the first non-SIGTERM exit "
            f"(exitcode {first.exitcode})",
        )
    if first is not None and first.rank is not None:
        rank, what = first.rank, "rank"
        named = [f for f in failures if f.root_cause_section]
        note = ""
        if named and named[0].rank != first.rank:
            note = f" (torchrun's Root Cause names rank {named[0].rank}, a SIGTERM victim)"
        return Culprit(
            rank,
            first.host,
            f"{what} {rank} is the first non-SIGTERM exit (exitcode {first.exitcode}){note}",
        )
    timed_out: dict[int, int | None] = {}
    for event in timeouts:
        rank = event_rank(event)
        if rank is None:
            continue
        pos = collective_position(event.text)
        old = timed_out.get(rank)
        timed_out[rank] = pos if old is None or (pos is not None and pos < old) else old
    silent = sorted(set(ranks_seen) - set(timed_out))
    if timed_out and len(silent) == 1:
        return Culprit(silent[0], None, f"rank {silent[0]} is the only rank that did not time out")
    positions = {r: p for r, p in timed_out.items() if p is not None}
    if len(set(positions.values())) > 1 and one_sequence(list(positions.values())):
        lowest = min(positions.values())
        behind = sorted(r for r, p in positions.items() if p == lowest)
        if len(behind) == 1:
            return Culprit(
                behind[0],
                None,
                f"rank {behind[0]} is behind: last completed collective {lowest}",
            )
    if first is not None and first.host:
        return Culprit(None, first.host, f"host {first.host} had the first non-SIGTERM exit")
    return Culprit(None, None, "no rank stands out")
