"""The config example in the README loads: documentation that drifts from code fails here."""

from __future__ import annotations

import re
from pathlib import Path

from trainmedic.service.config import load_config

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_config_example_is_valid(tmp_path: Path) -> None:
    blocks = re.findall(r"```toml\n(.*?)```", README.read_text(), re.S)
    assert blocks, "README has no TOML example"
    path = tmp_path / "trainmedic.toml"
    path.write_text(blocks[0])
    config = load_config(path, env={"TRAINMEDIC_STATE_DIR": str(tmp_path)})
    assert config.scheduler.kind == "slurm"
    assert config.scheduler.slurm.kernel_log_template.format(node="n1").endswith("n1/kern.log")
