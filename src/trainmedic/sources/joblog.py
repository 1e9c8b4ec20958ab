"""A job's own output: log lines, progress and checkpoint lines, JSONL progress files.

``JobLogSource.poll()`` turns new lines into observations:

* with a declared ``progress_regex`` (``logparse.declared``), a line it matches is a
  ``Progress`` and no other line is (the known formats below are not tried);
* a training step (the trainer's ``iter=... step_s=...``, Megatron, HF, Lightning, a
  ``key=value`` ``event=step iter=N``, plain ``step N``) becomes a ``Progress``; a line that
  only names an iteration (a resume announcement, a config echo, an error message: see
  ``logparse.progress.is_not_a_step``) does not;
* ``checkpoint begin iter=N`` -> ``CheckpointSaved(in_progress=True)``; a saved-checkpoint
  line (``logparse.checkpoint``, ``event=ckpt iter=N`` included) -> ``CheckpointSaved``;
* every line, these included, also -> ``LogLine`` with source ``app_log``, rank and node
  from its prefix: the engine scans each job log whole, as ``analyze`` scans a file (its
  progress facts count the steps, a loose step format may match an error line);
* each line of a JSONL progress file -> ``Progress``;
* with ``runs``, consecutive plain progress lines of one rank (``logparse.plain``: the
  trainer's step line, read by one regex) -> one ``ProgressRun``, which stands for the
  ``Progress`` and ``LogLine`` of each of them (the general path reads the rest);
* a file that cannot be read -> one ``SourceStale`` per disappearance, and a
  ``SourceRecovered`` when it can be read again.

``lines_read`` and ``progress_lines`` count what the source has seen, so the service can tell
a job whose progress format it does not know (many lines, no progress) and say so.

Progress and checkpoint observations carry both the line's own (printed) time and the time
the line was read (``received``): liveness is judged on the latter. Zone-less printed stamps
are read in ``tz`` (the service's ``[detect] log_timezone``; None: UTC).
"""

from __future__ import annotations

import itertools
import operator
import os
import re
import time
from collections.abc import Iterable
from datetime import tzinfo

from trainmedic.core.errors import ConfigError
from trainmedic.core.logparse.checkpoint import parse_checkpoint
from trainmedic.core.logparse.declared import compile_progress_regex, parse_declared
from trainmedic.core.logparse.plain import (
    Kind,
    PlainColumns,
    PlainStep,
    parse_plain,
    parse_plain_block,
)
from trainmedic.core.logparse.prefix import parse_prefix
from trainmedic.core.logparse.progress import ProgressLine, parse_progress, parse_progress_json
from trainmedic.core.model import EvidenceSource
from trainmedic.core.observations import (
    CheckpointSaved,
    LogLine,
    Observation,
    Progress,
    ProgressRun,
    SourceRecovered,
    SourceStale,
)
from trainmedic.sources.follower import FollowedBlock, FollowedLine, LogFollower
from trainmedic.sources.lines import (
    MAX_LINE_AGE_S,
    Clock,
    DirectoryScan,
    followed_time,
    line_time,
)
from trainmedic.sources.offsets import LineOrigin, OffsetBook

_NODE_KV = re.compile(r"node=(\S+)\s*")
_CKPT_BEGIN = re.compile(r"\bcheckpoint begin iter=(\d{1,18})(?!\d)")  # fits the store
_JSON_NODE = re.compile(r'"node"\s*:\s*"([^"]+)"')
LOG_SUFFIXES = (".log", ".out", ".err", ".txt")
_TEXT = operator.attrgetter("text")
_MAX_KINDS = 256  # kinds of plain line checked against the general path, per source


class JobLogSource:
    def __init__(
        self,
        job_id: str,
        log_paths: Iterable[str | os.PathLike[str]] = (),
        *,
        progress_paths: Iterable[str | os.PathLike[str]] = (),
        log_dirs: Iterable[str | os.PathLike[str]] = (),
        progress_dirs: Iterable[str | os.PathLike[str]] = (),
        clock: Clock = time.time,
        tz: tzinfo | None = None,
        book: OffsetBook | None = None,
        progress_regex: str = "",
        runs: bool = False,
    ) -> None:
        """``log_dirs``/``progress_dirs`` are scanned for new ``*.log|out|err|txt`` and
        ``*.jsonl`` files (per-rank files appear as the job starts). ``book``: resume where
        the service left each file; lines dated before its look-back window are no evidence.
        ``progress_regex`` was validated where it was declared; one that does not compile is
        ignored here (the known formats are read). ``runs``: plain progress lines come as
        ``ProgressRun`` observations (the service's engine takes them; one object per run,
        not two per line)."""
        self.job_id = job_id
        self._declared: re.Pattern[str] | None = None
        if progress_regex:
            try:
                self._declared = compile_progress_regex(progress_regex)
            except ConfigError:
                self._declared = None
        self.lines_read = 0
        self.progress_lines = 0
        self._runs = runs
        # Kinds of plain line (PlainStep.kind) and whether the general path reads the first
        # of them to the same observations: only then are such lines read as runs.
        self._trusted: dict[Kind, bool] = {}
        self._clock = clock
        self._tz = tz
        self._book = book
        self._window_start = book.window_start if book is not None else float("-inf")
        self._logs: dict[str, LogFollower] = {}
        self._progress: dict[str, LogFollower] = {}
        for path in log_paths:
            self.add_log(path)
        for path in progress_paths:
            self.add_progress(path)
        self._log_dirs = [DirectoryScan(d, LOG_SUFFIXES) for d in log_dirs]
        self._progress_dirs = [DirectoryScan(d, (".jsonl",)) for d in progress_dirs]

    def add_log(self, path: str | os.PathLike[str]) -> None:
        if os.fspath(path) not in self._logs:
            self._logs[os.fspath(path)] = LogFollower(path, book=self._book)

    def add_progress(self, path: str | os.PathLike[str]) -> None:
        if os.fspath(path) not in self._progress:
            self._progress[os.fspath(path)] = LogFollower(path, book=self._book)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(self._logs) + tuple(self._progress)

    def poll(self) -> list[Observation]:
        for scan in self._log_dirs:
            for found in scan.new_files():
                self.add_log(found)
        for scan in self._progress_dirs:
            for found in scan.new_files():
                self.add_progress(found)
        out: list[Observation] = []
        now = self._clock()
        runs = self._runs and self._declared is None
        for path, follower in self._logs.items():
            if runs:
                self._log_blocks(path, follower.poll_blocks(), now, out)
            else:
                lines = follower.poll()
                self.lines_read += len(lines)
                for line in lines:
                    self._log_line(path, line, now, out)
            self._stale(path, follower, now, out)
        for path, follower in self._progress.items():
            for line in follower.poll():
                self._json_line(line, now, out)
            self._stale(path, follower, now, out)
        self.progress_lines += sum(
            len(o) if isinstance(o, ProgressRun) else 1
            for o in out
            if isinstance(o, Progress | ProgressRun)
        )
        return out

    @property
    def declared(self) -> bool:
        """Whether the job declared its progress format (``progress_regex``)."""
        return self._declared is not None

    def close(self) -> None:
        for follower in (*self._logs.values(), *self._progress.values()):
            follower.close()

    def _stale(self, path: str, follower: LogFollower, now: float, out: list[Observation]) -> None:
        detail = follower.take_stale()
        if detail is not None:
            out.append(SourceStale(now, f"log:{path}", detail, job_id=self.job_id))
        if follower.take_recovered():
            out.append(SourceRecovered(now, f"log:{path}", job_id=self.job_id))

    def _log_line(self, path: str, line: FollowedLine, now: float, out: list[Observation]) -> None:
        line_no, text = line.line_no, line.text
        prefix = parse_prefix(text, tz=self._tz, now=now)
        body = text[prefix.body_start :]
        node = prefix.node
        m = _NODE_KV.match(body)
        if m:
            node = node or m.group(1)
            body = body[m.end() :]
        stamp = prefix.timestamp
        settled = followed_time(line, stamp, now, self._window_start, undated_backlog=True)
        # Dated before the look-back window: progress history, never evidence.
        history = settled is None
        t = settled if settled is not None else (stamp or now)
        begin = _CKPT_BEGIN.search(body) if "checkpoint begin" in body else None
        saved = None if begin else parse_checkpoint(body)
        if begin:
            out.append(
                CheckpointSaved(t, self.job_id, int(begin.group(1)), in_progress=True, received=now)
            )
        elif saved is not None:
            out.append(CheckpointSaved(t, self.job_id, saved, path=_saved_path(body), received=now))
        elif self._declared is not None:
            declared = parse_declared(self._declared, text)
            if declared is not None:
                out.append(self._progress_obs(declared, t, prefix.rank, node, now))
        else:
            progress = parse_progress(body)
            if progress is not None:
                out.append(self._progress_obs(progress, t, prefix.rank, node, now))
        if history:
            return
        out.append(
            LogLine(
                time=t,
                text=text,
                source=EvidenceSource.APP_LOG,
                path=path,
                line_no=line_no,
                job_id=self.job_id,
                node=node,
                rank=prefix.rank,
            )
        )

    def _log_blocks(
        self,
        path: str,
        read: list[FollowedLine | FollowedBlock],
        now: float,
        out: list[Observation],
    ) -> None:
        """A block of plain lines of one trusted kind is one run, read at C speed
        (``parse_plain_block``); other blocks and lines go through ``_log_lines_as_runs``."""
        lines: list[FollowedLine] = []
        for item in read:
            if isinstance(item, FollowedLine):
                lines.append(item)
                self.lines_read += 1
                continue
            self.lines_read += item.count
            columns = parse_plain_block(item.text, item.count)
            if columns is not None and columns.kind not in self._trusted:
                self._trust_first(path, item, now)
            if columns is None or not self._trusted.get(columns.kind):
                lines.extend(item.lines())
                continue
            run = self._block_run(path, item, columns, now)
            if run is None:
                lines.extend(item.lines())
            else:
                if lines:
                    self._log_lines_as_runs(path, lines, now, out)
                    lines = []
                out.append(run)
        if lines:
            self._log_lines_as_runs(path, lines, now, out)

    def _trust_first(self, path: str, block: FollowedBlock, now: float) -> None:
        """``_trust`` the kind of the block's first line (a plain line, dated as a line)."""
        text = block.text.split("\n", 1)[0]
        line = FollowedLine(block.first_line_no, text, block.origin, block.written_by)
        step = parse_plain(text)
        t = None if step is None else self._plain_time(line, step, now)
        if step is not None and t is not None:
            self._trust(path, line, step, t, now)

    def _plain_time(self, line: FollowedLine, step: PlainStep, now: float) -> float | None:
        """A plain line's time as ``_log_line`` dates it; None for history (a backlog line
        dated before the look-back window: no evidence, read by the general path)."""
        if line.origin is LineOrigin.LIVE:
            return line_time(step.stamp, now)
        return followed_time(line, step.stamp, now, self._window_start, undated_backlog=True)

    def _block_run(
        self, path: str, block: FollowedBlock, c: PlainColumns, now: float
    ) -> ProgressRun | None:
        """The block's run; None when some line is history (read line by line)."""
        times = self._block_times(block, c.stamps, now)
        if times is None:
            return None
        return ProgressRun(
            job_id=self.job_id,
            path=path,
            rank=c.rank,
            node=c.node,
            received=now,
            first_line_no=block.first_line_no,
            texts=c.texts,
            times=times,
            stamps=c.stamps,
            iterations=c.iterations,
            losses=c.losses,
            step_times=c.step_times,
            compute_times=c.compute_times,
            wait_times=c.wait_times,
            samples_per_s=c.samples_per_s,
        )

    def _block_times(
        self, block: FollowedBlock, stamps: tuple[float, ...], now: float
    ) -> tuple[float, ...] | None:
        """Each line's time as ``_log_line`` dates it (``line_time``, ``followed_time``);
        None when a backlog line is dated before the look-back window (history)."""
        if block.origin is LineOrigin.LIVE or block.written_by is None:
            if now - MAX_LINE_AGE_S <= min(stamps) and max(stamps) <= now + 1.0:
                return stamps  # each line keeps its own stamp
            return tuple(line_time(stamp, now) for stamp in stamps)
        if min(stamps) < self._window_start:
            return None
        return tuple(map(min, stamps, itertools.repeat(min(block.written_by, now))))

    def _log_lines_as_runs(
        self, path: str, lines: list[FollowedLine], now: float, out: list[Observation]
    ) -> None:
        """``_log_line`` for each line, but consecutive plain progress lines of one kind (read
        as written, numbered one after the other) make one ``ProgressRun``."""
        run: list[FollowedLine] = []
        steps: list[PlainStep] = []
        times: list[float] = []
        kind: Kind | None = None
        trusted = self._trusted
        for line in lines:
            step = parse_plain(line.text)
            t = None if step is None else self._plain_time(line, step, now)
            if (
                step is not None
                and t is not None
                and not trusted.get(step.kind)
                and not self._trust(path, line, step, t, now)
            ):
                t = None  # a kind of line the general path reads otherwise
            if run and (
                step is None
                or t is None
                or step.kind != kind
                or line.line_no != run[-1].line_no + 1
            ):
                out.append(self._run(path, run, steps, times, now))
                run, steps, times = [], [], []
            if step is None or t is None:
                self._log_line(path, line, now, out)
                continue
            kind = step.kind
            run.append(line)
            steps.append(step)
            times.append(t)
        if run:
            out.append(self._run(path, run, steps, times, now))

    def _trust(self, path: str, line: FollowedLine, step: PlainStep, t: float, now: float) -> bool:
        """Whether lines of ``step``'s kind may be read as runs: the general path reads this
        one (the first of its kind) to exactly what its run says."""
        trusted = self._trusted.get(step.kind)
        if trusted is None:
            general: list[Observation] = []
            self._log_line(path, line, now, general)
            trusted = general == self._run(path, [line], [step], [t], now).expand()
            if len(self._trusted) >= _MAX_KINDS:
                self._trusted.clear()
            self._trusted[step.kind] = trusted
        return trusted

    def _run(
        self,
        path: str,
        lines: list[FollowedLine],
        steps: list[PlainStep],
        times: list[float],
        now: float,
    ) -> ProgressRun:
        """A run of ``lines``, as ``parse_plain`` read them (``steps``), at ``times``."""
        first = steps[0]
        # One column per PlainStep field (stamp, rank, node, iteration, loss, step_time,
        # compute_time, wait_time, samples_per_s, kind), transposed at C speed.
        columns = list(zip(*steps, strict=True))
        return ProgressRun(
            job_id=self.job_id,
            path=path,
            rank=first.rank,
            node=first.node,
            received=now,
            first_line_no=lines[0].line_no,
            texts=tuple(map(_TEXT, lines)),
            times=tuple(times),
            stamps=columns[0],
            iterations=columns[3],
            losses=columns[4],
            step_times=columns[5],
            compute_times=None if first.compute_time is None else columns[6],
            wait_times=None if first.compute_time is None else columns[7],
            samples_per_s=None if first.samples_per_s is None else columns[8],
        )

    def _json_line(self, line: FollowedLine, now: float, out: list[Observation]) -> None:
        text = line.text
        progress = parse_progress_json(text)
        if progress is None:
            return
        m = _JSON_NODE.search(text)
        t = followed_time(line, progress.time, now, float("-inf"), undated_backlog=True) or now
        out.append(self._progress_obs(progress, t, progress.rank, m.group(1) if m else None, now))

    def _progress_obs(
        self, p: ProgressLine, t: float, rank: int | None, node: str | None, now: float
    ) -> Progress:
        return Progress(
            time=t,
            job_id=self.job_id,
            iteration=p.iteration,
            rank=rank if rank is not None else p.rank,
            node=node,
            step_time=p.step_time,
            compute_time=p.compute_time,
            wait_time=p.wait_time,
            loss=p.loss,
            samples_per_s=p.samples_per_s,
            received=now,
            epoch_step=p.epoch_step,
            epoch=p.epoch,
            epoch_len=p.epoch_len,
        )


def _saved_path(body: str) -> str:
    m = re.search(r"\bpath=(\S+)", body)
    return m.group(1) if m else ""
