"""Fuzz benchmark: every parser on ``--cases`` generated inputs (default 100,000), hostile ones
included, with no exception escaping and bounded time and memory per case.

Cases are built (seeded, reproducible) from fragments of real and hostile input, per family:

* ``log_line``  a line as the service reads it: prefix, progress, checkpoint, the matcher
* ``jsonl``     a line of the JSONL progress protocol
* ``tracker``   a line fed to the traceback and torchrun-table trackers
* ``squeue``    an ``squeue --json`` answer with a fuzzed job record next to a good one
* ``sinfo``     an ``sinfo --json`` answer with a fuzzed node record next to a good one
* ``scontrol``  a recorded ``scontrol -o show job`` line with a fuzzed user value
* ``hostlist``  a hostlist expression
* ``comment``   a job comment through discovery (limits, then the policy parser)
* ``config``    a TOML config text through the loader
* ``api_body``  a ``POST /jobs`` body through the API's model, admission and policy check

Line lengths go up to the follower's 64 KiB, digit runs to 6,000, nesting to 100,000.
Each case is timed alone (``perf_counter_ns``); the same case strings also go through a
trivial parser (``str.split``) in the same run, the baseline the ratio is taken against.
An exception other than the family's documented refusal (SchedulerError, ConfigError, a 4xx)
is an escape. Peak RSS is the process's ``ru_maxrss``; per-case memory is the largest
``tracemalloc`` peak over a sample of cases spread over the run. Prints one line per figure,
last exactly::

    cases=N escaped=E max_ms=M p99_ms=P peak_rss_mib=R ratio_vs_split=X

and exits 1 if anything escaped or a case took more than ``--max-case-ms``. Run:
``.venv/bin/python benchmarks/bench_fuzz.py [--cases N] [--seed S]``. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import random
import resource
import tempfile
import time
import tracemalloc
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

from fastapi import HTTPException
from pydantic import ValidationError

from trainmedic.api.guards import admit_registration
from trainmedic.api.models import JobRegistration
from trainmedic.core.errors import ConfigError, SchedulerError
from trainmedic.core.logparse.checkpoint import parse_checkpoint
from trainmedic.core.logparse.elastic import ChildFailureTracker
from trainmedic.core.logparse.prefix import parse_prefix
from trainmedic.core.logparse.progress import parse_progress, parse_progress_json
from trainmedic.core.logparse.traceback import TracebackTracker
from trainmedic.core.signatures.matcher import default_matcher
from trainmedic.core.states import JobState
from trainmedic.schedulers.base import JobInfo
from trainmedic.schedulers.slurm.hostlist import expand_hostlist
from trainmedic.schedulers.slurm.parse import parse_sinfo_json, parse_squeue_json
from trainmedic.schedulers.slurm.scontrol import JOB_KEY_ORDER, parse_scontrol_job
from trainmedic.service.config import ApiConfig, apply_policy_overrides, default_config
from trainmedic.service.config.loader import load_config
from trainmedic.service.config.sections import WatchConfig
from trainmedic.service.discovery import discover

ROOT = Path(__file__).resolve().parents[1]
RUNNING = (ROOT / "tests/data/slurm/scontrol_show_job_running.txt").read_text().strip()
LINE_FRAGMENTS = [
    "[rank", "[default", "]:", "[", "]", "(", ")", ": ", "=", ",", "/", "|", "%|", "\r", " ",
    "iter=", "step ", "Step ", "iteration ", "loss=", "loss: ", "nan", "inf", "1e400", "<",
    "it/s", "{'loss': ", "'step': ", "}", "Mar  7 04:58:42 node1 kernel: ", "2024-03-07 04:58 ",
    "[E0307 05:30:20.036 ", "node7:1234:1290 [3] NCCL INFO ", "Traceback (most recent call last):",
    '  File "train.py", line ', "RuntimeError: CUDA error: ", "KeyError", "Failures:", "[0]:",
    "  rank      : ", "  exitcode  : ", "(local_rank: ", "checkpoint saved ", "global_step",
    "saved checkpoint at iteration ", "NVRM: Xid (PCI:0000:5e:00): 79, ", "Permission denied",
    "[Errno 13] ", "exitcode", "Link is Down", "NCCL WARN ", "\x00", "\udcff", "☃", "٣", "a", "1",
]  # fmt: skip
TOML_LINES = [
    "[service]", "[watch]", "[policy]", "[detect]", "[scheduler]", "[scheduler.slurm]", "[api]",
    'mode = "action"', "poll_interval_s = -1", "api_port = 99999999999999999999", 'kind = "pbs"',
    "hang_k = nan", "retry_budget = { hardware = 1e400 }", 'allowed_roots = ["relative"]',
    'name_pattern = "(unclosed"', "max_body_bytes = 10", "x = ", '"', "[[", "= 1", "a.b.c = 1",
]  # fmt: skip
JSON_LEAVES = [None, True, 0, -1, 2**63, 10**30, 1.5, float("inf"), "", "x", "9" * 400, "a[0-9]"]


class Gen:
    """Seeded generators of hostile-but-plausible input, one per family."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def digits(self) -> str:
        return "9" * self.rng.choice([1, 5, 18, 19, 400, 4301, 6000])

    def piece(self) -> str:
        roll = self.rng.random()
        if roll < 0.70:
            return self.rng.choice(LINE_FRAGMENTS)
        if roll < 0.85:
            return str(self.rng.randrange(-(2**70), 2**70))
        if roll < 0.93:
            return self.digits()
        return self.rng.choice(LINE_FRAGMENTS) * self.rng.choice([10, 100, 1000, 4000])

    def line(self) -> str:
        text = "".join(self.piece() for _ in range(self.rng.randrange(1, 12)))
        return text[: 64 * 1024]  # the follower's line limit

    def json_value(self, depth: int = 0) -> object:
        roll = self.rng.random()
        if depth > 3 or roll < 0.5:
            return self.rng.choice(JSON_LEAVES)
        if roll < 0.75:
            return [self.json_value(depth + 1) for _ in range(self.rng.randrange(4))]
        keys = ["job_id", "job_state", "nodes", "name", "state", "exit_code", "array_task_id"]
        return {self.rng.choice(keys): self.json_value(depth + 1) for _ in range(4)}

    def nested(self) -> str:
        n = self.rng.choice([10, 1000, 100_000])
        return "[" * n + "]" * n

    def hostlist(self) -> str:
        parts = ["node", "a", "[", "]", ",", "-", "0", "1", "07", "99999", self.digits()]
        return "".join(self.rng.choice(parts) for _ in range(self.rng.randrange(1, 16)))


def _log_line(text: str) -> object:
    prefix = parse_prefix(text)
    body = text[prefix.body_start :]
    return parse_progress(body), parse_checkpoint(body), default_matcher().match(text)


def _tracker(text: str) -> object:
    tracebacks, failures = TracebackTracker(), ChildFailureTracker()
    tracebacks.feed(1, "Traceback (most recent call last):")
    failures.feed(1, "[0]:")
    return tracebacks.feed(2, text), failures.feed(2, text), failures.close()


def _squeue(text: str) -> object:
    return parse_squeue_json(text)


def _sinfo(text: str) -> object:
    return parse_sinfo_json(text)


def _scontrol(text: str) -> object:
    return parse_scontrol_job(text)


def _hostlist(text: str) -> object:
    return expand_hostlist(text)


POLICY = default_config().policy


def _comment(text: str) -> object:
    job = JobInfo("1", JobState.RUNNING, comment=text)
    return discover([job], WatchConfig(), POLICY, known=())


CONFIG_DIR = Path(tempfile.mkdtemp(prefix="bench-fuzz-"))
CONFIG_FILE = CONFIG_DIR / "c.toml"


def _config(text: str) -> object:
    CONFIG_FILE.write_text(text, encoding="utf-8", errors="surrogatepass")
    return load_config(CONFIG_FILE, env={"HOME": str(CONFIG_DIR)})


API = ApiConfig(allowed_roots=(str(CONFIG_DIR),), allowed_partitions=("gpu",))


def _api_body(text: str) -> object:
    body = JobRegistration.model_validate_json(text)
    admit_registration(body, API)
    return apply_policy_overrides(POLICY, body.policy, source="policy")


Parser = Callable[[str], object]
# family -> (parser, the exceptions that are its documented refusals)
FAMILIES: dict[str, tuple[Parser, tuple[type[BaseException], ...]]] = {
    "log_line": (_log_line, ()),
    "jsonl": (parse_progress_json, ()),
    "tracker": (_tracker, ()),
    "squeue": (_squeue, (SchedulerError,)),
    "sinfo": (_sinfo, (SchedulerError,)),
    "scontrol": (_scontrol, (SchedulerError,)),
    "hostlist": (_hostlist, (SchedulerError,)),
    "comment": (_comment, ()),
    "config": (_config, (ConfigError,)),
    "api_body": (_api_body, (ValidationError, HTTPException, ConfigError)),
}
WEIGHTS = {"log_line": 40, "jsonl": 8, "tracker": 10, "squeue": 6, "sinfo": 4, "scontrol": 8}
WEIGHTS |= {"hostlist": 6, "comment": 6, "config": 4, "api_body": 8}


def make_case(gen: Gen, family: str) -> str:
    rng = gen.rng
    if family in ("log_line", "tracker"):
        return gen.line()
    if family == "jsonl":
        doc = {
            "iteration": rng.choice([1, 2**63, -(2**63), 10**18, True]),
            "loss": gen.json_value(),
        }
        return rng.choice([json.dumps(doc), '{"iteration": ' + gen.digits() + "}", gen.line()])
    if family == "squeue":
        good = {"job_id": 1, "job_state": "RUNNING", "nodes": "node[1-2]"}
        bad = rng.choice([gen.json_value(), {"job_id": 2, "nodes": gen.hostlist()}])
        text = json.dumps({"jobs": [bad, good]})
        return rng.choice([text, text.replace("2,", gen.digits() + ",", 1), gen.nested()])
    if family == "sinfo":
        nodes = [gen.json_value(), {"name": "node9", "state": "IDLE"}]
        return json.dumps({"nodes": nodes})
    if family == "scontrol":
        key = rng.choice(["Comment", "JobName", "WorkDir", "Command"])
        words = [*JOB_KEY_ORDER, "=", " ", "x", "/", gen.digits(), "a=b"]
        value = "".join(rng.choice(words) for _ in range(rng.randrange(1, 10)))
        head, rest = RUNNING.split(f" {key}=", 1)
        tail = rest.split("  ", 1)[1] if key == "Comment" else rest.split(" ", 1)[1]
        return f"{head} {key}={value} {tail}"
    if family == "hostlist":
        return gen.hostlist()
    if family == "comment":
        return rng.choice(
            [
                json.dumps({"trainmedic": gen.json_value()}),
                '{"trainmedic": ' + gen.nested() + "}",
                '{"trainmedic": {"checkpoint_dir": "' + "x" * rng.choice([10, 20_000]) + '"}}',
                gen.line(),
            ]
        )
    if family == "config":
        return "\n".join(rng.choice(TOML_LINES) for _ in range(rng.randrange(1, 10)))
    body = {"job_id": rng.choice(["j1", "", "x" * 200, "a b"]), "partition": "gpu"}
    body[rng.choice(["log_paths", "kernel_logs", "checkpoint_dir", "policy", "nodes"])] = (
        gen.json_value()
    )
    return rng.choice([json.dumps(body), '{"job_id": "j", "policy": ' + gen.nested() + "}"])


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=20260101)
    parser.add_argument("--max-case-ms", type=float, default=1000.0)
    parser.add_argument("--memory-sample", type=int, default=2000)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # discovery warns about each refused comment: by design
    families = list(WEIGHTS)
    weights = [WEIGHTS[f] for f in families]

    def cases() -> Iterator[tuple[str, str]]:
        """The same cases each time it is called (one seed), made one at a time: holding
        100,000 of them (some of 200,000 characters) would hide the parsers' memory."""
        gen = Gen(args.seed)
        for _ in range(args.cases):
            family = gen.rng.choices(families, weights)[0]
            yield family, make_case(gen, family)

    for family, (run, _) in FAMILIES.items():  # warm caches and imports outside the timing
        with contextlib.suppress(Exception):  # a warm-up; the run below reports
            run(make_case(Gen(1), family))
    rss_start = _rss_mib()
    times: list[int] = []
    per_family: dict[str, list[int]] = defaultdict(list)
    escaped: Counter[str] = Counter()
    examples: dict[str, str] = {}
    largest = 0
    for family, case in cases():
        largest = max(largest, len(case))
        run, refusals = FAMILIES[family]
        started = time.perf_counter_ns()
        try:
            run(case)
        except refusals:
            pass
        except Exception as error:  # what the benchmark looks for
            escaped[family] += 1
            examples.setdefault(family, f"{type(error).__name__}: {str(error)[:120]}")
        elapsed = time.perf_counter_ns() - started
        times.append(elapsed)
        per_family[family].append(elapsed)
    baseline_ns = 0
    for _family, case in cases():
        started = time.perf_counter_ns()
        case.split()
        baseline_ns += time.perf_counter_ns() - started
    tracemalloc.start()
    worst_kib = 0.0
    step = max(1, args.cases // args.memory_sample)
    for index, (family, case) in enumerate(cases()):
        if index % step:
            continue
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        run, _refusals = FAMILIES[family]
        with contextlib.suppress(Exception):  # counted in the timed run above
            run(case)
        worst_kib = max(worst_kib, (tracemalloc.get_traced_memory()[1] - base) / 1024.0)
    tracemalloc.stop()

    ordered = sorted(times)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e6

    total_ns = sum(times)
    print(f"cases: {len(times)} ({', '.join(f'{f} {len(v)}' for f, v in per_family.items())})")
    print(f"escaped exceptions: {sum(escaped.values())} {dict(escaped) or ''}")
    for family, example in examples.items():
        print(f"  e.g. {family}: {example}")
    print(f"per case ms: p50 {pct(0.5):.3f}  p99 {pct(0.99):.3f}  p99.9 {pct(0.999):.3f}")
    print(f"per case ms: max {ordered[-1] / 1e6:.1f}")
    for family, values in sorted(per_family.items()):
        mean_us = sum(values) / len(values) / 1e3
        print(f"  {family:<9} max {max(values) / 1e6:8.2f} ms  mean {mean_us:8.1f} us")
    print(f"case size: max {largest} chars")
    print(
        f"memory: peak RSS {_rss_mib():.1f} MiB (start {rss_start:.1f} MiB); "
        f"largest per-case allocation peak {worst_kib:.0f} KiB over {args.memory_sample} cases"
    )
    ratio = total_ns / max(baseline_ns, 1)
    print(f"time: {total_ns / 1e9:.1f} s parsing vs {baseline_ns / 1e9:.3f} s str.split baseline")
    max_ms = ordered[-1] / 1e6
    print(
        f"cases={len(times)} escaped={sum(escaped.values())} max_ms={max_ms:.1f} "
        f"p99_ms={pct(0.99):.3f} peak_rss_mib={_rss_mib():.1f} ratio_vs_split={ratio:.0f}"
    )
    return 1 if escaped or max_ms > args.max_case_ms else 0


if __name__ == "__main__":
    raise SystemExit(main())
