"""A job's declared progress format (progress_regex): validation, parsing, discovery, the log
source, the config default, and the message for a job whose progress trainmedic cannot read."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from trainmedic.api.app import create_app
from trainmedic.core.errors import ConfigError
from trainmedic.core.logparse.declared import compile_progress_regex, parse_declared
from trainmedic.core.observations import Progress, SourceRecovered, SourceStale
from trainmedic.core.states import JobState
from trainmedic.schedulers.base import JobInfo
from trainmedic.service.config import default_config, load_config
from trainmedic.service.config.sections import WatchConfig
from trainmedic.service.discovery import discover
from trainmedic.service.progress_format import ProgressFormatCheck
from trainmedic.sources.joblog import JobLogSource
from trainmedic.store import Store, sqlite_url
from trainmedic.store.codec import spec_from_dict, spec_to_dict
from trainmedic.store.records import JobSpec

JSONL = r'"event": "train_step", "step": (?P<iter>\d+), "loss": (?P<loss>[-\d.eE]+)'
LINE = '{"timestamp": "2026-12-01T08:16:13.123Z", "event": "train_step", "step": 120, "loss": 0.5}'


def test_a_declared_regex_reads_iteration_and_loss() -> None:
    pattern = compile_progress_regex(JSONL)
    progress = parse_declared(pattern, LINE)
    assert progress is not None and (progress.iteration, progress.loss) == (120, 0.5)
    assert parse_declared(pattern, '{"event": "checkpoint_saved", "step": 100}') is None
    timed = compile_progress_regex(r"it (?P<iter>\d+) took (?P<step_time>[\d.]+)s")
    assert parse_declared(timed, "it 7 took 0.25s").step_time == 0.25  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (r"step=(\d+)", "needs a named group (?P<iter>"),
        (r"step=(?P<iter>\d+", "not a valid regular expression"),
        (r"step=(?P<iter>\d+) lr=(?P<lr>\S+)", "unknown named group(s) lr"),
        ("", "non-empty string"),
    ],
)
def test_an_unusable_regex_is_one_clear_line(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        compile_progress_regex(text, "job 7 progress_regex")
    assert says in str(err.value) and str(err.value).startswith("job 7 progress_regex")
    assert "\n" not in str(err.value)


def _job(comment: str) -> JobInfo:
    return JobInfo("7", JobState.RUNNING, nodes=("node1",), stdout_path="/l/7.out", comment=comment)


def test_discovery_takes_the_regex_from_the_comment_or_the_config() -> None:
    policy = default_config().policy
    comment = '{"trainmedic": {"progress_regex": "step (?P<iter>\\\\d+)", "retry_budget": {}}}'
    (found,) = discover([_job(comment)], WatchConfig(), policy, ())
    assert found.spec.progress_regex == r"step (?P<iter>\d+)" and found.spec.policy == {
        "retry_budget": {}
    }
    watch = WatchConfig(progress_regex=r"it=(?P<iter>\d+)")
    (default,) = discover([_job('{"trainmedic": {}}')], watch, policy, ())
    assert default.spec.progress_regex == r"it=(?P<iter>\d+)"


def test_a_bad_regex_in_the_comment_is_reported_and_the_job_still_watched(
    caplog: pytest.LogCaptureFixture,
) -> None:
    comment = '{"trainmedic": {"progress_regex": "step=(\\\\d+)", "checkpoint_dir": "/c"}}'
    (found,) = discover([_job(comment)], WatchConfig(), default_config().policy, ())
    assert found.spec.progress_regex == "" and found.spec.checkpoint_dir == "/c"
    assert "job 7 progress_regex: needs a named group" in caplog.text


def test_the_config_default_is_validated(tmp_path: Path) -> None:
    path = tmp_path / "tm.toml"
    path.write_text('[watch]\nprogress_regex = "step=(\\\\d+)"\n')
    with pytest.raises(ConfigError, match=r"watch\.progress_regex: needs a named group"):
        load_config(path, env={"HOME": str(tmp_path)})


def test_with_a_declared_format_only_its_lines_are_progress(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_text(
        '{"event": "checkpoint_restored", "step": 100}\n'
        " loading checkpoint from /ckpt at iteration 400\n"  # known formats: "iteration 400"
        f"{LINE}\n"
    )
    declared = JobLogSource("7", [log], progress_regex=JSONL)
    progress = [o for o in declared.poll() if isinstance(o, Progress)]
    assert [(p.iteration, p.loss) for p in progress] == [(120, 0.5)]
    assert (declared.lines_read, declared.progress_lines) == (3, 1)
    # Undeclared, none of these lines is a step trainmedic knows (the JSON step line included).
    known = JobLogSource("7", [log])
    assert [o.iteration for o in known.poll() if isinstance(o, Progress)] == []
    assert (known.lines_read, known.progress_lines, known.declared) == (3, 0, False)


def test_the_spec_keeps_its_regex_in_the_store() -> None:
    spec = JobSpec(log_paths=("/l",), progress_regex=r"(?P<iter>\d+)")
    assert spec_from_dict(spec_to_dict(spec)) == spec


def test_a_job_without_progress_lines_is_told_once_how_to_declare_them() -> None:
    check = ProgressFormatCheck(after_s=30)
    args = {"lines": 40, "progress": 0, "paths": ("/l/7.out", "/l/7.err"), "declared": False}
    assert check.check("7", 100.0, **args) is None  # not seen running yet
    check.running("7", 100.0)
    assert check.check("7", 129.0, **args) is None
    message = check.check("7", 131.0, **args)
    assert message is not None and "none of 40 lines read from /l/7.out, /l/7.err" in message
    assert '--comment=\'{"trainmedic": {"progress_regex": "step=(?P<iter>' in message
    assert "[watch] progress_regex" in message
    assert check.check("7", 200.0, **args) is None  # once
    check.running("8", 100.0)
    assert check.check("8", 200.0, **{**args, "progress": 3}) is None
    assert check.check("8", 200.0, **{**args, "lines": 0}) is None


def test_post_jobs_refuses_an_unusable_regex_in_one_line(tmp_path: Path) -> None:
    base = default_config({"HOME": str(tmp_path)})
    url = sqlite_url(str(tmp_path / "s.db"))
    config = dataclasses.replace(
        base, service=dataclasses.replace(base.service, api_token="w", db_url=url)
    )
    store = Store(url)
    client = TestClient(create_app(store, config), headers={"Authorization": "Bearer w"})
    body = {"job_id": "7", "scheduler": "slurm", "progress_regex": r"step=(\d+)"}
    refused = client.post("/jobs", json=body)
    assert refused.status_code == 422, refused.text
    assert "needs a named group (?P<iter>" in refused.text
    body["progress_regex"] = r"step=(?P<iter>\d+)"
    assert client.post("/jobs", json=body).status_code == 201
    stored = store.get_job("7")
    assert stored is not None and stored.spec.progress_regex == r"step=(?P<iter>\d+)"


class _Logs:
    def __init__(self, lines: int, progress: int) -> None:
        self.lines_read, self.progress_lines = lines, progress
        self.paths, self.declared = ("/l/7.out",), False


class _Sources:
    def __init__(self, logs: _Logs) -> None:
        self.logs = logs


def test_an_unknown_format_makes_the_jobs_progress_source_unknown_until_progress_comes() -> None:
    check = ProgressFormatCheck(after_s=30)
    logs = _Logs(lines=12, progress=0)
    jobs = {"7": _Sources(logs)}
    check.running("7", 0.0)
    assert check.check_all(jobs, 29.0) == []
    (stale,) = check.check_all(jobs, 30.0)  # at the grace, the instant a start-up hang could be
    assert isinstance(stale, SourceStale) and (stale.source, stale.job_id) == ("progress", "7")
    assert check.check_all(jobs, 40.0) == []
    logs.progress_lines = 1
    (back,) = check.check_all(jobs, 50.0)
    assert isinstance(back, SourceRecovered) and back.source == "progress"
    assert check.check_all(jobs, 60.0) == []
