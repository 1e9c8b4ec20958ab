"""The config snippets in docs/restarts.md load, with the values they document."""

from __future__ import annotations

import re
from pathlib import Path

from trainmedic.service.config import load_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "restarts.md"


def test_restarts_doc_snippets_are_valid_config(tmp_path: Path) -> None:
    blocks = re.findall(r"```toml\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 2
    path = tmp_path / "tm.toml"
    path.write_text("\n".join(blocks))
    config = load_config(path, env={"TRAINMEDIC_STATE_DIR": str(tmp_path)})
    assert config.sources.lookback_s == 600
    assert (config.watchdog.embedded, config.watchdog.timeout_s) == (True, 120)
