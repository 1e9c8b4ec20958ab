"""The catalogue is data: these tests tie it to the code and to its own examples."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainmedic.core.errors import ConfigError
from trainmedic.core.model import ActionHint, Category, Kind, Role
from trainmedic.core.signatures.catalogue import (
    ALLOWED_GROUPS,
    Signature,
    load_catalogue,
    parse_catalogue,
)
from trainmedic.core.signatures.matcher import default_matcher

CATALOGUE = load_catalogue()
SIGNATURES = CATALOGUE.signatures


def test_catalogue_is_large_and_ids_unique() -> None:
    ids = [s.id for s in SIGNATURES]
    assert len(ids) >= 60
    assert len(ids) == len(set(ids))


def test_enum_fields_and_groups_are_valid() -> None:
    for s in SIGNATURES:
        assert isinstance(s.category, Category)
        assert isinstance(s.kind, Kind)
        assert isinstance(s.role, Role)
        assert isinstance(s.action_hint, ActionHint)
        for pattern in s.patterns:
            assert set(re.compile(pattern).groupindex) <= ALLOWED_GROUPS, s.id


@pytest.mark.parametrize("signature", SIGNATURES, ids=lambda s: s.id)
def test_examples_match_and_counter_examples_do_not(signature: Signature) -> None:
    matcher = default_matcher()
    assert signature.examples
    for example in signature.examples:
        assert signature.id in [h.signature.id for h in matcher.match(example)], example
        # The keyword prefilter must hold: each matching line contains a keyword.
        assert any(k in example for k in signature.keywords), example
    for counter in signature.counter_examples:
        assert signature.id not in [h.signature.id for h in matcher.match_naive(counter)], counter


# DESIGN.md's Xid buckets (NVSentinel): the table in catalogue.toml must agree.
DESIGN_XID_BUCKETS = {
    ActionHint.REBOOT_NODE: (79, 160),
    ActionHint.RESET_GPU: (48, 64, 95, 119, 120, 74),
    ActionHint.RESTART_APP: (94, 13, 31, 43),
    ActionHint.IGNORE: (63,),
}


def test_xid_table_follows_design_buckets() -> None:
    for hint, codes in DESIGN_XID_BUCKETS.items():
        for code in codes:
            assert CATALOGUE.xid_rule(code).action_hint is hint, code
    for code in range(144, 151):
        rule = CATALOGUE.xid_rule(code)
        assert rule.category is Category.GPU_HARDWARE
        assert rule.action_hint in (ActionHint.RESET_GPU, ActionHint.CONTACT_SUPPORT)
    assert CATALOGUE.xid_rule(79).strong and CATALOGUE.xid_rule(48).strong
    assert CATALOGUE.xid_rule(45).role is Role.CASCADE
    assert CATALOGUE.xid_rule(13).category is Category.APPLICATION
    unknown = CATALOGUE.xid_rule(9999)
    assert unknown.action_hint is ActionHint.CONTACT_SUPPORT
    assert unknown.category is Category.GPU_HARDWARE


def test_load_from_path_equals_packaged() -> None:
    path = Path(__file__).parents[2] / "src/trainmedic/core/signatures/catalogue.toml"
    assert load_catalogue(path) == CATALOGUE


_MINIMAL = """
xid = []
[[signature]]
id = "test.boom"
patterns = ['boom (?P<rank>\\d+)']
category = "application"
kind = "crash"
role = "primary"
action_hint = "fix_code"
strong = false
keywords = ["boom"]
examples = ["boom 3"]
description = "x"
[xid_default]
name = "unknown"
category = "gpu_hardware"
kind = "crash"
role = "primary"
action_hint = "contact_support"
strong = false
"""


def test_minimal_catalogue_parses() -> None:
    catalogue = parse_catalogue(_MINIMAL, "t")
    assert catalogue.by_id("test.boom").keywords == ("boom",)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('kind = "crash"\nrole', 'kind = "crash"\ncolour = "red"\nrole', "unknown key"),
        ('category = "application"', 'category = "app"', "category 'app'"),
        ("(?P<rank>", "(?P<who>", "unknown capture group"),
        ("boom (?P<rank>\\d+)", "boom (", "does not compile"),
        ('keywords = ["boom"]', 'keywords = ["42"]', "other than digits"),
        ('id = "test.boom"', 'id = "Boom"', "dotted lowercase"),
    ],
)
def test_bad_entries_raise_one_line_config_error(old: str, new: str, message: str) -> None:
    text = _MINIMAL
    assert old in text
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        parse_catalogue(text.replace(old, new, 1), "bad.toml")
    assert "\n" not in str(info.value)
    assert "bad.toml" in str(info.value)


def test_duplicate_ids_rejected() -> None:
    text = _MINIMAL
    entry = text[text.index("[[signature]]") : text.index("[xid_default]")]
    with pytest.raises(ConfigError, match="duplicate signature id"):
        parse_catalogue(text.replace(entry, entry + entry), "dup.toml")


def test_unreadable_path_is_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_catalogue(tmp_path / "missing.toml")


def test_includes_are_read_beside_the_main_file(tmp_path: Path) -> None:
    part = _MINIMAL[_MINIMAL.index("[[signature]]") : _MINIMAL.index("[xid_default]")]
    main = _MINIMAL.replace(part, "").replace("xid = []", 'xid = []\ninclude = ["part.toml"]')
    (tmp_path / "main.toml").write_text(main, encoding="utf-8")
    (tmp_path / "part.toml").write_text(part, encoding="utf-8")
    assert [s.id for s in load_catalogue(tmp_path / "main.toml").signatures] == ["test.boom"]
    (tmp_path / "part.toml").write_text("xid = []\n" + part, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"part\.toml: unknown key"):
        load_catalogue(tmp_path / "main.toml")
    (tmp_path / "part.toml").unlink()
    with pytest.raises(ConfigError, match="cannot read"):
        load_catalogue(tmp_path / "main.toml")
    bad = main.replace('"part.toml"', '"../etc/part.toml"')
    with pytest.raises(ConfigError, match="cannot include"):
        parse_catalogue(bad, "bad.toml", lambda name: "")
