"""The context-rule table: valid, each rule fires on its own example, refinements in action."""

from __future__ import annotations

import pytest

from trainmedic.core.attribute.facts import JobFacts
from trainmedic.core.attribute.rules import default_rules, parse_rules, refine
from trainmedic.core.attribute.verdict import attribute
from trainmedic.core.errors import ConfigError
from trainmedic.core.model import Category, Event, EvidenceSource, Kind, Role


def line_event(text: str, category: Category = Category.APPLICATION, **extra: object) -> Event:
    return Event(
        signature="test.line",
        category=category,
        kind=Kind.CRASH,
        role=Role.PRIMARY,
        line=1,
        text=text,
        **extra,  # type: ignore[arg-type]
    )


def test_table_loads_with_unique_ids() -> None:
    rules = default_rules()
    assert len(rules) >= 5
    assert len({r.id for r in rules}) == len(rules)


@pytest.mark.parametrize("rule", default_rules(), ids=lambda r: r.id)
def test_each_rule_fires_on_its_example(rule: object) -> None:
    from trainmedic.core.attribute.rules import ContextRule

    assert isinstance(rule, ContextRule)
    root = line_event(rule.example, category=next(iter(rule.category_in or {Category.APPLICATION})))
    others = []
    if rule.example_event:
        xid = 0
        for token in rule.example_event.replace(",", " ").split():
            if token.isdigit():
                xid = int(token)
                break
        others.append(
            Event(
                signature="kernel.example",
                category=Category.GPU_HARDWARE,
                kind=Kind.CRASH,
                role=Role.CONTEXT,
                line=2,
                text=rule.example_event,
                xid=xid or None,
                evidence=EvidenceSource.KERNEL_LOG,
            )
        )
    assert refine(root, [root, *others], rule.example_near) == rule
    # without its evidence, the rule stays quiet
    assert refine(root, [root], "") is None or refine(root, [root], "") != rule


def test_unknown_key_fails_fast() -> None:
    bad = (
        '[[rule]]\nid="x"\ncategory="storage"\nconfidence=0.5\nbasis="b"\n'
        'example="e"\nnear="x"\nnera="y"\n'
    )
    with pytest.raises(ConfigError, match="unknown key"):
        parse_rules(bad)


def test_rule_needs_evidence() -> None:
    with pytest.raises(ConfigError, match="evidence"):
        parse_rules(
            '[[rule]]\nid="x"\ncategory="storage"\nconfidence=0.5\nbasis="b"\nexample="e"\n'
        )


def test_illegal_access_alone_is_application_with_xid13_hardware() -> None:
    ima = line_event("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert attribute([ima]).category is Category.APPLICATION
    xid13 = Event(
        signature="kernel.xid",
        category=Category.GPU_HARDWARE,
        kind=Kind.CRASH,
        role=Role.CONTEXT,
        line=7,
        text="NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception",
        xid=13,
        evidence=EvidenceSource.KERNEL_LOG,
        source="kern.log",
    )
    assert attribute([ima, xid13]).category is Category.GPU_HARDWARE


def test_enospc_shm_vs_checkpoint() -> None:
    enospc = line_event("OSError: [Errno 28] No space left on device", Category.STORAGE)
    shm = JobFacts(
        neighbours={
            enospc: "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-ab12"
        }
    )
    ckpt = JobFacts(
        neighbours={enospc: "torch/serialization.py:628 in save\n    torch.save(state, path)"}
    )
    assert attribute([enospc], facts=shm).category is Category.SYSTEM_SOFTWARE
    assert attribute([enospc], facts=ckpt).category is Category.STORAGE


def test_bus_error_in_nccl_is_system_software() -> None:
    bus = line_event(
        "Caught signal 7 (Bus error: nonexistent physical address)", Category.NODE_HARDWARE
    )
    facts = JobFacts(neighbours={bus: " 2 0x000000000007587d ncclGroupEnd()  ???:0"})
    assert attribute([bus], facts=facts).category is Category.SYSTEM_SOFTWARE
