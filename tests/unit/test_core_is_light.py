"""The core and `analyze` import nothing heavy: `pip install trainmedic` stays small."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "logs" / "xid79.log"
HEAVY = ("torch", "fastapi", "sqlalchemy", "uvicorn", "httpx", "prometheus_client", "pydantic")


def test_analyze_imports_only_the_standard_library_and_the_core() -> None:
    code = (
        "import sys\n"
        "from trainmedic.cli.main import main\n"
        f"rc = main(['analyze', '--json', {str(EXAMPLE)!r}])\n"
        f"print(rc, [m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "0 []"
