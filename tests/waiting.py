"""``wait``: what the real-component tests poll with (a job, a process, the store, the API)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait(what: str, check: Callable[[], Any], timeout: float = 30.0, every: float = 0.2) -> Any:
    """``check()``'s first true value, polled every ``every`` s for ``timeout`` seconds; else
    the test fails saying what it waited for."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
