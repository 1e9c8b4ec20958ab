"""An event stored with an incident reads back with every field it had: a field the codec
forgot (``likely`` was, when it was added) would change the verdict read from the store."""

from __future__ import annotations

from dataclasses import fields

from trainmedic.core.model import ActionHint, Category, Event, EvidenceSource, Kind, Role
from trainmedic.store.codec import event_from_dict, event_to_dict


def test_every_event_field_survives_the_codec() -> None:
    event = Event(
        signature="nccl.unhandled_cuda_error",
        category=Category.SYSTEM_SOFTWARE,
        kind=Kind.CRASH,
        role=Role.PRIMARY,
        line=7,
        text="unhandled cuda error",
        source="job.log",
        evidence=EvidenceSource.KERNEL_LOG,
        timestamp=1_800_000_000.5,
        rank=3,
        node="gpu-07",
        gpu="0000:3b:00.0",
        xid=79,
        action_hint=ActionHint.RESTART_APP,
        strong=True,
        likely=True,
    )
    defaults = Event("s", Category.UNKNOWN, Kind.NONE, Role.CONTEXT, 1, "")
    changed = {f.name for f in fields(Event) if getattr(event, f.name) != getattr(defaults, f.name)}
    assert changed == {f.name for f in fields(Event)}  # the sample sets every field
    assert event_from_dict(event_to_dict(event)) == event
