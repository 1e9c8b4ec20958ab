"""The global step of a per-epoch progress bar (Lightning's) across resumes.

Lightning's bar counts the batches of an epoch, its checkpoints the global step
(``epoch=E-step=S.ckpt``); in a run that was never resumed, ``Epoch E: n/T`` is step
``E x T + n``. After a resume it is not:

* resumed mid-epoch it draws ``Training: n/?``: the count within the resumed epoch, with no
  epoch and no total (checkpoint at step 2300, 200 batches per epoch: ``Training: 101/?`` is
  step 2301);
* resumed from the checkpoint of an epoch's last batch its epoch label can lag by one for the
  whole attempt (``Epoch 10: 1/200`` at step 2201).

Read as they stand, the same failure of two attempts was read at different iterations, and
the policy's "same failure at the same iteration" never matched. What places such a count is
the checkpoint the attempt resumed from (the newest one seen before its first step, from the
checkpoint watcher or a saved-checkpoint line) and the batches per epoch (a bar's total, seen
in any attempt). The bar draws once per batch (``refresh_rate`` 1, Lightning's default), so
what it draws after the resume is a step each time its count moves on:

* ``Training: n/?`` -> the resumed epoch's first step + n: ``((S - 1) // T) x T + n`` (a
  checkpoint of an epoch's last batch belongs to the epoch it ends), when that lies past the
  resume point ``S``. A count at or before ``S`` is Lightning running the restored epoch's
  last batches again, each a new step: resumed from step 2600 (200 batches per epoch) the
  lab's trace shows ``Training: 198/?``, ``199/?``, ``200/?`` drawn at steps 2601, 2602,
  2603 (another attempt from 2200: ``199/?``, ``200/?`` at 2201, 2202; the number varies
  from attempt to attempt). Such a count, or one without a known ``T``, is anchored: the
  attempt's first count is step ``S + 1``, counting on from there;
* ``Epoch E: n/T`` -> ``E x T + n``, moved for the rest of the attempt: after such a
  ``Training`` segment, the bar starts at the segment's last step (the epochs now begin
  there: ``Epoch 12: 1/200`` is step 2604 in the first example above); with no segment
  before it, by whole epochs, as many as the attempt's first such bar needs to lie past the
  resume point (its label lagging by one: ``Epoch 10: 1/200`` at step 2201). A bar that is
  right (a run never resumed, or the epochs after a mid-epoch resume) needs none and gets
  none.

Without a checkpoint to resume from, a count is taken as it is (no worse than before). The
clock is pure: the engine feeds it checkpoints, attempts and bars.

A draw is terminated by the next draw's ``\r``, so the last draw of an attempt that was
killed (no teardown closed its bar) is read only when the next attempt draws its first one,
in the same chunk: seen on the lab cluster as ``Epoch 11: 7/200`` (the killed attempt's
step 2407) read just before the retry's ``Training: 0/?``. Placed as the retry's, it fixed
the retry's whole-epoch lag before its ``Training`` segment could, and every later step of
the retry was read two short (2847 for 2849: the deterministic error was then not "the same
iteration" and was retried once more). A new attempt's bar starts over (at 0, then a resumed
fit's ``Training`` count or an epoch at or before the resume point), never past where the
previous attempt's bar stood; so until the new attempt has drawn a position of its own, a
labelled draw at or past the previous attempt's furthest one is that attempt's (``stale``).
"""

from __future__ import annotations

from trainmedic.core.observations import Progress

# The previous attempt's draws a new attempt's first chunk may hold: its last, unterminated
# draw, and the same step drawn again with its loss (the postfix changes, not the count).
STALE_DRAWS = 2


class EpochBarClock:
    """One job's bar placement: the batches per epoch and newest checkpoint (job-wide), the
    resume point and the label's lag (per attempt)."""

    __slots__ = (
        "_anchor",
        "_epoch_len",
        "_last",
        "_newest",
        "_opened",
        "_previous_bar",
        "_raw",
        "_resumed_from",
        "_segment_end",
        "_shift",
        "_stale_left",
    )

    def __init__(self) -> None:
        self._newest: int | None = None
        self._epoch_len: int | None = None
        self._resumed_from: int | None = None
        self._shift: int | None = None  # steps the attempt's epoch labels lag by
        self._anchor: tuple[int, int] | None = None  # (first "Training" count, its step)
        self._last: int | None = None  # the attempt's latest step read
        self._segment_end: int | None = None  # the latest step an unlabelled count placed
        self._raw: tuple[int, int] | None = None  # the attempt's furthest "Epoch E: n" as (E, n)
        self._previous_bar: tuple[int, int] | None = None  # the previous attempt's ``_raw``
        self._opened = True  # the attempt's bar has drawn (the first attempt's always has)
        self._stale_left = 0

    @property
    def resumed_from(self) -> int | None:
        return self._resumed_from

    def new_attempt(self) -> None:
        """A new attempt starts from the newest checkpoint known."""
        self._resumed_from = self._newest
        self._shift = self._anchor = self._last = self._segment_end = None
        self._previous_bar, self._raw = self._raw, None
        self._opened = self._previous_bar is None
        self._stale_left = STALE_DRAWS

    def stale(self, progress: Progress) -> bool:
        """``progress`` is the previous attempt's last draw, read only now (module doc): the
        new attempt's bar has drawn no position of its own yet, and this draw is labelled at
        or past the previous attempt's furthest. At most ``STALE_DRAWS`` per attempt, so a
        bar that does not start over loses no more than that."""
        count = progress.epoch_step
        if self._opened or count is None:
            return False
        previous = self._previous_bar
        if (
            count > 0
            and progress.epoch is not None
            and previous is not None
            and (progress.epoch, count) >= previous
            and self._stale_left > 0
        ):
            self._stale_left -= 1
            return True
        self._opened = True
        return False

    def checkpoint(self, iteration: int) -> None:
        """A completed checkpoint. Before the attempt's first step it is the one the attempt
        resumes from (the watcher may see the last save only after the new attempt began)."""
        if self._newest is None or iteration > self._newest:
            self._newest = iteration
        if self._last is None and (self._resumed_from is None or iteration > self._resumed_from):
            self._resumed_from = iteration

    def step(self, progress: Progress) -> int:
        """The global step ``progress`` reports."""
        count = progress.epoch_step
        if count is None:
            found = progress.iteration
        elif progress.epoch is not None and progress.epoch_len:
            found = self._labelled(progress.epoch, count, progress.epoch_len)
            if self._raw is None or (progress.epoch, count) > self._raw:
                self._raw = (progress.epoch, count)
        else:
            found = self._unlabelled(count)
        self._last = found if self._last is None else max(self._last, found)
        return found

    def passed(self, iteration: int) -> None:
        """``step`` of plain reports (no bar count) up to ``iteration``: they are their own
        global steps, and only the highest is remembered."""
        self._last = iteration if self._last is None else max(self._last, iteration)

    def _labelled(self, epoch: int, count: int, per_epoch: int) -> int:
        self._epoch_len = per_epoch
        naive = epoch * per_epoch + count
        if self._shift is None and self._segment_end is not None:
            # The attempt's bar so far was a "Training" segment: this epoch starts after it.
            self._shift = self._segment_end - epoch * per_epoch
        elif self._shift is None:
            bounds = [b for b in (self._last, self._after_resume()) if b is not None]
            floor = max(bounds) if bounds else None
            lag = 0 if floor is None or naive >= floor else -(-(floor - naive) // per_epoch)
            self._shift = lag * per_epoch
        return naive + self._shift

    def _unlabelled(self, count: int) -> int:
        resumed = self._resumed_from
        if resumed is None:
            return count  # nothing to place it by: the count, as before
        per_epoch = self._epoch_len
        if self._anchor is None and per_epoch:
            # The epoch the resume point lies in (a checkpoint of an epoch's last batch
            # belongs to the epoch it ends), when the count lies past the resume point.
            found = (resumed - 1) // per_epoch * per_epoch + count
            if found > resumed:
                self._segment_end = found
                return found
        if self._anchor is None:
            # Restored batches run again (each a new step), or no epoch length to place the
            # count by: the attempt's first count is the step after the resume point.
            self._anchor = (count, resumed + 1)
        first, at = self._anchor
        found = at + count - first
        self._segment_end = found
        return found

    def _after_resume(self) -> int | None:
        return None if self._resumed_from is None else self._resumed_from + 1
