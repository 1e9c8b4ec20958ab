"""The ISO-8601 UTC form trainmedic writes (attempt banners, the example trainer's lines) and
``logparse.prefix`` reads back: ``2026-11-29T08:50:01.123Z``."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_ms(unix_time: float) -> str:
    """``2026-11-29T08:50:01.123Z``: UTC, millisecond precision."""
    moment = datetime.fromtimestamp(unix_time, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
