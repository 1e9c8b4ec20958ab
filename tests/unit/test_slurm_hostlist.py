"""Hostlist expressions and node-name validation (the guard before any Slurm argv)."""

from __future__ import annotations

import pytest

from trainmedic.core.errors import SchedulerError
from trainmedic.schedulers.slurm.hostlist import (
    HostlistError,
    expand_hostlist,
    join_hostlist,
    validate_node_name,
)


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("node[1-3,5]", ("node1", "node2", "node3", "node5")),
        ("node[1-2],gpu07", ("node1", "node2", "gpu07")),
        ("n[01-03]", ("n01", "n02", "n03")),
        ("n[098-101]", ("n098", "n099", "n100", "n101")),
        ("a[1-2]b[3-4]", ("a1b3", "a1b4", "a2b3", "a2b4")),
        ("rack1-node[7]", ("rack1-node7",)),
        ("node1,node1", ("node1",)),
        ("node4", ("node4",)),
        ("", ()),
        ("(null)", ()),
    ],
)
def test_expand(expr: str, names: tuple[str, ...]) -> None:
    assert expand_hostlist(expr) == names


@pytest.mark.parametrize(
    "expr", ["node[1-", "node]1[", "node[3-1]", "x[a]", "n[1-2]]", "a b", "-oProxyCommand=x"]
)
def test_malformed_hostlist_is_rejected(expr: str) -> None:
    with pytest.raises(HostlistError):
        expand_hostlist(expr)


@pytest.mark.parametrize("name", ["-x", "node 1", "node;rm", "a=b", "", "n" * 65, "node[1]"])
def test_unsafe_node_names_never_reach_a_command(name: str) -> None:
    with pytest.raises(SchedulerError, match="invalid node name"):
        validate_node_name(name)


def test_join_sorts_and_dedups() -> None:
    assert join_hostlist(["node3", "node1", "node3"]) == "node1,node3"
    with pytest.raises(HostlistError):
        join_hostlist(["node1", "bad name"])
