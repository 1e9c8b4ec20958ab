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
in any attempt):

* ``Training: n/?`` -> the resumed epoch's first step + n: ``((S - 1) // T) x T + n`` (a
  checkpoint of an epoch's last batch belongs to the epoch it ends); a count at or before
  ``S`` is the bar redrawing the restored batches (``Training: 198/?`` ... ``200/?`` right
  after a resume from step 2800), no step; without a known ``T``, ``S + 1`` at the
  attempt's first such count, counting on from there;
* ``Epoch E: n/T`` -> ``E x T + n`` plus whole epochs, as many as the attempt's first such
  bar needs to lie past the resume point (and past the steps this attempt already read); the
  lag is the attempt's, so it is kept for the rest of the attempt. A bar that is right (a
  run never resumed, or the epochs after a mid-epoch resume) needs none and gets none.

Without a checkpoint to resume from, a count is taken as it is (no worse than before). The
clock is pure: the engine feeds it checkpoints, attempts and bars.
"""

from __future__ import annotations

from trainmedic.core.observations import Progress


class EpochBarClock:
    """One job's bar placement: the batches per epoch and newest checkpoint (job-wide), the
    resume point and the label's lag (per attempt)."""

    __slots__ = ("_anchor", "_epoch_len", "_last", "_newest", "_resumed_from", "_shift")

    def __init__(self) -> None:
        self._newest: int | None = None
        self._epoch_len: int | None = None
        self._resumed_from: int | None = None
        self._shift: int | None = None  # steps the attempt's epoch labels lag by
        self._anchor: tuple[int, int] | None = None  # (first "Training" count, its step)
        self._last: int | None = None  # the attempt's latest step read

    @property
    def resumed_from(self) -> int | None:
        return self._resumed_from

    def new_attempt(self) -> None:
        """A new attempt starts from the newest checkpoint known."""
        self._resumed_from = self._newest
        self._shift = self._anchor = self._last = None

    def checkpoint(self, iteration: int) -> None:
        """A completed checkpoint. Before the attempt's first step it is the one the attempt
        resumes from (the watcher may see the last save only after the new attempt began)."""
        if self._newest is None or iteration > self._newest:
            self._newest = iteration
        if self._last is None and (self._resumed_from is None or iteration > self._resumed_from):
            self._resumed_from = iteration

    def step(self, progress: Progress) -> int | None:
        """The global step ``progress`` reports; None: it reports none of this attempt (the
        resumed bar redrawing the restored batches, at or before the resume point)."""
        count = progress.epoch_step
        if count is None:
            found: int | None = progress.iteration
        elif progress.epoch is not None and progress.epoch_len:
            found = self._labelled(progress.epoch, count, progress.epoch_len)
        else:
            found = self._unlabelled(count)
        if found is not None:
            self._last = found if self._last is None else max(self._last, found)
        return found

    def _labelled(self, epoch: int, count: int, per_epoch: int) -> int:
        self._epoch_len = per_epoch
        naive = epoch * per_epoch + count
        if self._shift is None:
            bounds = [b for b in (self._last, self._after_resume()) if b is not None]
            floor = max(bounds) if bounds else None
            lag = 0 if floor is None or naive >= floor else -(-(floor - naive) // per_epoch)
            self._shift = lag * per_epoch
        return naive + self._shift

    def _unlabelled(self, count: int) -> int | None:
        resumed = self._resumed_from
        if resumed is None:
            return count  # nothing to place it by: the count, as before
        per_epoch = self._epoch_len
        if per_epoch:
            # The epoch the resume point lies in (a checkpoint of an epoch's last batch
            # belongs to the epoch it ends); its restored batches are redrawn, no steps.
            found = (resumed - 1) // per_epoch * per_epoch + count
            return found if found > resumed else None
        if self._anchor is None:
            self._anchor = (count, resumed + 1)
        first, at = self._anchor
        return at + count - first

    def _after_resume(self) -> int | None:
        return None if self._resumed_from is None else self._resumed_from + 1
