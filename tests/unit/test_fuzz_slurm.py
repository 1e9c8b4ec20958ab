"""Property-based tests (hypothesis) of the Slurm parsers: ``squeue --json`` / ``sinfo --json``
records, ``scontrol -o`` records with hostile field values, hostlist expressions and the job
comments discovery reads.

The properties: a bad record never hides a good one; a value a user controls (job name,
comment, paths) either leaves every other field as Slurm printed it or gets the record
refused, never misread; a hostlist expands to at most ``MAX_HOSTS`` valid names; only the
documented exceptions escape."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainmedic.core.errors import SchedulerError
from trainmedic.core.states import JobState
from trainmedic.schedulers.base import JobInfo
from trainmedic.schedulers.slurm.hostlist import (
    MAX_HOSTS,
    HostlistError,
    expand_hostlist,
    validate_node_name,
)
from trainmedic.schedulers.slurm.parse import parse_sinfo_json, parse_squeue_json
from trainmedic.schedulers.slurm.scontrol import JOB_KEY_ORDER, parse_scontrol_job
from trainmedic.service.config import default_config
from trainmedic.service.config.sections import WatchConfig
from trainmedic.service.discovery import discover

# More with TRAINMEDIC_FUZZ_EXAMPLES=2000 (the default keeps the unit suite quick).
EXAMPLES = int(os.environ.get("TRAINMEDIC_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
# Nested JSON records are slow to generate: half as many.
FUZZ_JSON = settings(FUZZ, max_examples=max(10, EXAMPLES // 2))
DATA = Path(__file__).parent.parent / "data" / "slurm"
RUNNING = (DATA / "scontrol_show_job_running.txt").read_text().strip()

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=12,
)
JOB_KEYS = ["job_id", "job_state", "nodes", "excluded_nodes", "array_task_id", "array_job_id"]
JOB_KEYS += ["exit_code", "priority", "restart_cnt", "standard_output", "comment", "name"]
HOSTLISTS = st.lists(
    st.sampled_from(["node", "gpu", "a", "[", "]", ",", "-", "0", "1", "9", "07", "99999", "x.y"]),
    max_size=20,
).map("".join)
FIELD_TEXT = st.lists(
    st.sampled_from([*sorted(JOB_KEY_ORDER), "=", " ", "  ", "x", "/", "(null)", "a=b", "[1-2]"]),
    max_size=12,
).map("".join)


@FUZZ_JSON
@given(st.lists(st.dictionaries(st.sampled_from(JOB_KEYS), JSON_VALUES | HOSTLISTS), max_size=4))
def test_bad_squeue_records_never_hide_a_good_one(records: list[dict[str, object]]) -> None:
    good = {"job_id": 4242, "job_state": "RUNNING", "nodes": "node[1-2]"}
    jobs = parse_squeue_json(json.dumps({"jobs": [*records, good]}))
    assert "4242" in [j.job_id for j in jobs]
    for job in jobs:
        assert len(job.nodes) <= MAX_HOSTS and len(job.excluded_nodes) <= MAX_HOSTS
        assert isinstance(job.attempt, int) and job.state in JobState


@FUZZ_JSON
@given(st.lists(st.dictionaries(st.sampled_from(["name", "state", "state_flags"]), JSON_VALUES)))
def test_bad_sinfo_records_never_hide_a_good_one(records: list[dict[str, object]]) -> None:
    good = {"name": "node9", "state": "IDLE"}
    nodes = parse_sinfo_json(json.dumps({"nodes": [*records, good]}))
    assert "node9" in [n.name for n in nodes]
    assert all(validate_node_name(n.name) for n in nodes)


@FUZZ
@given(HOSTLISTS)
def test_hostlists_expand_to_bounded_valid_names_or_are_refused(expr: str) -> None:
    try:
        names = expand_hostlist(expr)
    except HostlistError:
        return
    assert len(names) <= MAX_HOSTS and len(set(names)) == len(names)
    assert all(validate_node_name(n) == n for n in names)


def _with(line: str, key: str, value: str) -> str:
    head, rest = line.split(f" {key}=", 1)
    following = rest.split("  ", 1)[1] if key == "Comment" else rest.split(" ", 1)[1]
    return f"{head} {key}={value} {following}"


@FUZZ
@given(st.sampled_from(["Comment", "JobName", "WorkDir", "Command"]), FIELD_TEXT)
def test_a_user_value_in_scontrol_output_is_refused_or_changes_nothing_else(
    key: str, value: str
) -> None:
    try:
        details = parse_scontrol_job(_with(RUNNING, key, value))
    except SchedulerError as error:
        assert "ambiguous" in str(error)
        return
    assert (details.job_id, details.state, details.attempt) == ("1", JobState.RUNNING, 0)
    assert (details.nodes, details.excluded_nodes, details.batch_host) == (
        ("node1", "node2"),
        (),
        "node1",
    )
    assert details.stdout_path == details.stderr_path == "/tmp/c1rec/lab/run-1.out"
    assert (details.node_count, details.partition, details.user) == (2, "debug", "root")


COMMENTS = st.one_of(
    JSON_VALUES.map(lambda v: json.dumps({"trainmedic": v})),
    st.integers(1, 50_000).map(lambda n: '{"trainmedic": ' + "[" * n + "]" * n + "}"),
    st.integers(1, 50_000).map(lambda n: '{"trainmedic": {"a": "' + "x" * n + '"}}'),
    st.text(max_size=40),
)


@FUZZ
@given(COMMENTS)
def test_any_comment_is_read_refused_or_ignored_and_discovery_goes_on(comment: str) -> None:
    jobs = [
        JobInfo("1", JobState.RUNNING, nodes=("node1",), comment=comment, partition="gpu"),
        JobInfo("2", JobState.RUNNING, comment='{"trainmedic": {}}', partition="cpu"),
    ]
    found = discover(jobs, WatchConfig(), default_config().policy, known=())
    assert "2" in [f.job_id for f in found]
