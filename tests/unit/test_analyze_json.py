"""The JSON contract of ``analyze --json`` (DESIGN.md) and the human report."""

from __future__ import annotations

import json
from pathlib import Path

from trainmedic.offline.analyze import analyze_path
from trainmedic.offline.report import format_text, to_json_dict

CKPT = """\
node=n1 iter=99 loss=0.51 step_s=0.01
checkpoint saved iter=100 path=/ckpt/100.pt
node=n1 iter=100 loss=0.50 step_s=0.01
Traceback (most recent call last):
  File "/job/train.py", line 61, in save
    torch.save(state, path)
  File "/venv/lib/python3.11/site-packages/torch/serialization.py", line 628, in save
    with _open_zipfile_writer(f) as opened_zipfile:
RuntimeError: File /ckpt/200.pt cannot be opened.
"""


def test_contract_fields(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    path.write_text(CKPT)
    data = json.loads(json.dumps(to_json_dict(analyze_path(path))))
    for key in ("source", "failure", "kind", "category", "confidence", "root_cause"):
        assert key in data
    assert data["source"] == str(path)
    assert data["failure"] is True and data["kind"] == "crash"
    assert data["category"] == "storage"
    assert 0.0 <= data["confidence"] <= 1.0
    assert data["root_cause"]["line"] == 9
    assert set(data["root_cause"]) >= {"signature", "line", "text"}
    assert set(data["implicated"]) == {"nodes", "ranks", "gpus"}
    assert isinstance(data["cascades"], list)
    assert set(data["advice"]) >= {"action", "exclude_nodes", "drain_nodes", "basis"}
    assert data["advice"]["action"] in ("restart", "restart_excluding", "stop", "none")
    assert data["last_checkpoint"] == 100


def test_healthy_log_json(tmp_path: Path) -> None:
    path = tmp_path / "ok.log"
    path.write_text("".join(f"node=n1 iter={i} loss=0.5 step_s=0.01\n" for i in range(50)))
    data = to_json_dict(analyze_path(path))
    assert data["failure"] is False and data["kind"] == "none" and data["root_cause"] is None
    assert data["advice"]["action"] == "none"
    assert data["last_iteration"] == 49


def test_text_report_shows_root_line_with_neighbours(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    path.write_text(CKPT)
    text = format_text(analyze_path(path))
    assert ">>       9 | RuntimeError: File /ckpt/200.pt cannot be opened." in text
    assert "torch.save(state, path)" in text
    assert "category: storage" in text and "advice:" in text
