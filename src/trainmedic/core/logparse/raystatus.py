"""Ray's ``ray status`` resources block: a demand left pending that the free resources hold.

``ray status`` (and the autoscaler's status in ``monitor.log``) prints the cluster's resources
as "used/total name" rows under ``Usage:`` (``Total Usage:`` in Ray 2.10+), with the share held
by placement groups in brackets ("1.0/4.0 GPU (1.0 used of 1.9 reserved in placement groups)"),
then the work waiting for them under ``Demands:`` ("{'GPU': 0.9}: 1+ pending tasks/actors (1+
using placement groups)"). A task or actor waits when the cluster is full (the autoscaler adds
a node, or the user asked for more than exists); one that waits while every resource it asks
for is free (in its placement groups' reservation when it runs inside one) is the scheduler not
placing it: fractional GPUs in a reserved bundle, a stale resource view. Named the scheduler as
a hang and a guess (``likely``): a snapshot taken as the task was submitted shows it too.

Only unit-less resources are compared (CPU, GPU, custom ones); a demand that names memory or a
resource the block does not list, and pending placement groups (whose bundles must fit on one
node each, which the totals cannot tell), are no finding.
"""

from __future__ import annotations

import re

from trainmedic.core.logparse.structured import Finding
from trainmedic.core.model import ActionHint, Category, EvidenceSource, Kind, Role

# "0.9999999999999999/4.0 GPU (0.9999999999999999 used of 1.9 reserved in placement groups)"
_USAGE_ROW = re.compile(
    r"^\s*(?P<used>\d+(?:\.\d+)?)/(?P<total>\d+(?:\.\d+)?) (?P<name>[\w:.-]+)"
    r"(?: \((?P<pg_used>\d+(?:\.\d+)?) used of (?P<pg_total>\d+(?:\.\d+)?) reserved in"
    r" placement groups\))?\s*$"
)
# a row with units ("121.07GiB/256.00GiB memory", "0B/73.03GiB object_store_memory", Ray 1.x's
# "0.00/58.500 GiB memory")
_SIZED_ROW = re.compile(r"^\s*\d+(?:\.\d+)?\s?(?:[KMGTP]i?)?B?/\d+(?:\.\d+)?\s?(?:[KMGTP]i?)?B \w+")
_DEMAND_ROW = re.compile(
    r"^\s*(?P<shape>\{[^{}]*\})(?P<bundles> \* \d+ \(\w+\))?: \d+\+ pending "
    r"(?P<what>tasks/actors|placement groups)(?P<in_pg> \(\d+\+ using placement groups\))?"
)
_RESOURCE = re.compile(r"'(?P<name>[^']+)': (?P<amount>\d+(?:\.\d+)?)")
# the sections that may stand between Usage and Demands (Ray 2.10+), and their rows
_BETWEEN = re.compile(
    r"^\s*(?:(?:Total )?Constraints:|\(no request_resources\(\) requests\)"
    r"|\{[^{}]*\}: \d+ from request_resources\(\))?\s*$"
)
_EPSILON = 1e-6  # Ray prints sums of fractions (0.9999999999999999)


class RayStatusParser:
    triggers: tuple[str, ...] = ("Usage:",)

    __slots__ = ("_free", "_free_in_pg", "_in_demands", "active")

    def __init__(self) -> None:
        self.active = False
        self._in_demands = False
        self._free: dict[str, float] = {}  # resource -> free amount in the cluster
        self._free_in_pg: dict[str, float] = {}  # resource -> free share of the reservation

    def feed(self, line_no: int, body: str) -> Finding | None:
        head = body.strip()
        if head in ("Usage:", "Total Usage:"):
            self.active, self._in_demands = True, False
            self._free, self._free_in_pg = {}, {}
            return None
        if not self.active:
            return None
        if head in ("Demands:", "Total Demands:"):
            self._in_demands = True
            return None
        if not self._in_demands:
            self._usage(body)
            return None
        demand = _DEMAND_ROW.match(body)
        if demand is None:
            self.active = head.startswith("(no resource demands)")
            return None
        if self._fits(demand):
            return Finding(
                signature="raystatus.demand_pending_with_free_resources",
                category=Category.SCHEDULER,
                kind=Kind.HANG,
                role=Role.PRIMARY,
                line=line_no,
                text=head[:300],
                evidence=EvidenceSource.SCHEDULER,
                action_hint=ActionHint.NONE,
                likely=True,
            )
        return None

    def _usage(self, body: str) -> None:
        row = _USAGE_ROW.match(body)
        if row is not None:
            name = row["name"]
            self._free[name] = float(row["total"]) - float(row["used"])
            if row["pg_total"] is not None:
                self._free_in_pg[name] = float(row["pg_total"]) - float(row["pg_used"])
        elif _SIZED_ROW.match(body) is None and _BETWEEN.match(body) is None:
            self.active = False  # the block ended before any demand

    def _fits(self, demand: re.Match[str]) -> bool:
        """Every resource the task asks for is free where it would run."""
        if demand["what"] != "tasks/actors" or demand["bundles"]:
            return False
        asked = {m["name"]: float(m["amount"]) for m in _RESOURCE.finditer(demand["shape"])}
        pool = self._free_in_pg if demand["in_pg"] else self._free
        return bool(asked) and all(
            name in pool and 0 < amount <= pool[name] + _EPSILON for name, amount in asked.items()
        )
