"""What ``analyze`` makes of one log given as text: the helper the mechanism tests share
(each writes a short log in a wording of its own and asserts the verdict)."""

from __future__ import annotations

from pathlib import Path

from trainmedic.core.model import Verdict
from trainmedic.offline.analyze import analyze_path


def verdict_of(tmp_path: Path, text: str) -> Verdict:
    """``analyze`` of ``text`` written as ``tmp_path/job.log``."""
    path = tmp_path / "job.log"
    path.write_text(text)
    return analyze_path(path).verdict
