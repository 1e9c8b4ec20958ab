"""Match log lines against the catalogue, fast, and turn hits into model Events.

Speed comes from a prefilter in three steps, so that the catalogue's regexes run only on the
rare lines that could match:

0. a memo keyed by the line's shape (digits deleted) answers for lines seen before in all
   but their numbers, which in a training log is nearly every line (see ``Matcher``);
1. *anchors*, short pieces of the keywords chosen in prefilter.py, reject most other healthy
   lines with one regex scan and a few ``in`` tests;
2. on the lines that pass, the anchors found select the keywords to test with ``in``, and the
   keywords select the signatures whose regexes are tried.

Every keyword contains an anchor (by construction), and every line a signature matches
contains one of its keywords (the tests check), so the prefilter never loses a hit; the
tests also compare it with :meth:`Matcher.match_naive`, which tries every regex.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from trainmedic.core.model import Event, EvidenceSource, LinePrefix, Role
from trainmedic.core.signatures.catalogue import Catalogue, Signature, load_catalogue
from trainmedic.core.signatures.prefilter import choose_anchors, trie_pattern

_PCI = re.compile(r"(?:[0-9a-fA-F]{4,8}:)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-7])?")
_DIGITS = b"0123456789"
_DIGITS_TABLE = str.maketrans("", "", "0123456789")
_MEMO_SIZE = 1 << 14  # shapes remembered; a log has a few hundred in practice
MAX_LINE = 1024
"""Characters of one line that the regexes see (its head and tail). Several catalogue
patterns backtrack quadratically on hostile text (a run of spaces after "exitcode", a path
of dots after "Permission denied"); at 1024 characters the worst line costs tens of
milliseconds, where 64 KiB cost minutes. Real error lines name their mechanism in the first
or last few hundred characters."""
_MEMO_MAX_LINE = 4096  # longer lines skip the memo (rare, and costly to keep as keys)


@dataclass(frozen=True, slots=True)
class Hit:
    """One signature matching one line; ``groups`` holds the named groups that matched.
    ``outranked``: a generic (bare exception type) hit on a line that a mechanism signature
    also matches; its event is context, so the mechanism decides (see ``_rank``)."""

    signature: Signature
    groups: tuple[tuple[str, str], ...] = ()
    outranked: bool = False

    def group(self, name: str) -> str | None:
        for key, value in self.groups:
            if key == name:
                return value
        return None


class Matcher:
    """Finds every catalogue signature that matches a line (in catalogue order).

    A small memo maps a line's *shape* (its UTF-8 bytes with ASCII digits deleted) to the
    signatures worth trying. Logs repeat a few shapes millions of times (iteration lines, NCCL
    INFO chatter), so most lines cost one ``bytes.translate`` and one dict lookup. It is sound
    because anchors and keywords are compared digit-free too: a keyword in a line is still in
    its shape, so the candidates found from the shape are a superset of the true ones, and the
    regexes themselves always run on the real line. Concurrent use is safe under the GIL:
    a race on the memo only recomputes an entry.
    """

    def __init__(self, catalogue: Catalogue) -> None:
        self.catalogue = catalogue
        self._signatures = catalogue.signatures
        self._regexes = tuple(
            tuple(re.compile(pattern) for pattern in signature.patterns)
            for signature in catalogue.signatures
        )
        keyword_sigs: dict[str, set[int]] = {}
        for index, signature in enumerate(catalogue.signatures):
            for keyword in signature.keywords:
                keyword_sigs.setdefault(_strip_digits(keyword), set()).add(index)
        anchors = choose_anchors(keyword_sigs, "\n".join(catalogue.healthy_lines))
        self._gate = re.compile(trie_pattern(anchors.scanned) if anchors.scanned else "(?!)").search
        self._checked = anchors.checked
        # Each keyword is filed under every anchor it contains: the gate reports the shortest
        # anchor starting at each position, which is then still one of the keyword's anchors.
        self._by_anchor: dict[str, tuple[tuple[str, frozenset[int]], ...]] = {
            anchor: tuple(
                (keyword, frozenset(sigs))
                for keyword, sigs in keyword_sigs.items()
                if anchor in keyword
            )
            for anchor in anchors.scanned + anchors.checked
        }
        self._memo: dict[bytes, tuple[int, ...]] = {}

    def match(self, text: str, shape: bytes | None = None) -> tuple[Hit, ...]:
        """Every signature matching ``text``, in catalogue order (empty for healthy lines).

        A line longer than ``MAX_LINE`` characters (binary junk, progress bars joined by
        ``\\r``) is matched on its head and tail only, which keeps every regex linear-time.
        ``shape`` is :func:`line_shape` of ``text`` when the caller has it already.
        """
        text = _bounded(text)
        if len(text) > _MEMO_MAX_LINE:
            candidates = self._candidates(_strip_digits(text))
        else:
            if shape is None:
                shape = line_shape(text)
            memo = self._memo
            found = memo.get(shape)
            if found is None:
                found = self._candidates(shape.decode("utf-8", "surrogatepass"))
                if len(memo) >= _MEMO_SIZE:
                    memo.clear()  # crude but bounded; refills with the shapes still in use
                memo[shape] = found
            candidates = found
        if not candidates:
            return ()
        return self._try(text, candidates)

    def silent(self, shape: bytes) -> bool:
        """No line of this shape (``line_shape``; a line of at most ``MAX_LINE`` characters)
        can match: ``match`` of any of them is empty, whatever its digits."""
        memo = self._memo
        found = memo.get(shape)
        if found is None:
            found = self._candidates(shape.decode("utf-8", "surrogatepass"))
            if len(memo) >= _MEMO_SIZE:
                memo.clear()
            memo[shape] = found
        return not found

    def _candidates(self, shape: str) -> tuple[int, ...]:
        """Indices of the signatures with a keyword in ``shape`` (a digit-free line)."""
        gate = self._gate
        anchors = {anchor for anchor in self._checked if anchor in shape}
        found = gate(shape)
        while found is not None:
            anchors.add(found.group())
            found = gate(shape, found.start() + 1)
        candidates: set[int] = set()
        for anchor in anchors:
            for keyword, sigs in self._by_anchor[anchor]:
                if keyword in shape:
                    candidates.update(sigs)
        return tuple(sorted(candidates))

    def match_naive(self, text: str) -> tuple[Hit, ...]:
        """The same answer as :meth:`match`, trying every regex: the reference for tests."""
        return self._try(_bounded(text), range(len(self._signatures)))

    def _try(self, text: str, indices: Iterable[int]) -> tuple[Hit, ...]:
        hits: list[Hit] = []
        for index in indices:
            for regex in self._regexes[index]:
                m = regex.search(text)
                if m is not None:
                    groups = tuple((k, v) for k, v in m.groupdict().items() if v)
                    hits.append(Hit(self._signatures[index], groups))
                    break
        return _rank(hits)

    def to_event(
        self,
        hit: Hit,
        *,
        line: int,
        text: str,
        source: str,
        evidence: EvidenceSource,
        prefix: LinePrefix,
    ) -> Event:
        """Build the Event for ``hit``: entities from its groups, else from the line prefix;
        for an Xid, category/kind/role/action/strength from the Xid table."""
        signature = hit.signature
        category, kind, role = signature.category, signature.kind, signature.role
        if hit.outranked:
            role = Role.CONTEXT
        action_hint, strong = signature.action_hint, signature.strong
        xid = _to_int(hit.group("xid"))
        if xid is not None:
            rule = self.catalogue.xid_rule(xid)
            category, kind, role = rule.category, rule.kind, rule.role
            action_hint, strong = rule.action_hint, rule.strong
        rank = _to_int(hit.group("rank"))
        pci = hit.group("pci")
        return Event(
            signature=signature.id,
            category=category,
            kind=kind,
            role=role,
            line=line,
            text=text,
            source=source,
            evidence=evidence,
            timestamp=prefix.timestamp,
            rank=rank if rank is not None else prefix.rank,
            node=hit.group("node") or prefix.node,
            gpu=hit.group("gpu") or (normalize_pci(pci) if pci else None),
            xid=xid,
            action_hint=action_hint,
            strong=strong,
            likely=signature.likely and xid is None,
        )


_MECHANISM_ROLES = frozenset({Role.PRIMARY, Role.CASCADE})


def _rank(hits: list[Hit]) -> tuple[Hit, ...]:
    """Mark the generic hits of a line that a mechanism also matches as outranked.

    "ValueError: Horovod was not built with MPI support" matches ``py.value_error`` (the job's
    code raised) and ``stack.feature_not_built`` (the installation lacks a backend): the type
    is what every framework raises for anything, the message names the cause. A mechanism is a
    non-generic hit that can stand for a cause (primary) or for another rank's failure
    (cascade); context and teardown lines say too little to overrule the type. Done here, not
    in attribution, so that every consumer of the events (analyze, the live engine, the store)
    sees one role per line."""
    if len(hits) < 2 or not any(h.signature.generic for h in hits):
        return tuple(hits)
    named = any(not h.signature.generic and h.signature.role in _MECHANISM_ROLES for h in hits)
    if not named:
        return tuple(hits)
    return tuple(replace(h, outranked=True) if h.signature.generic else h for h in hits)


def line_shape(text: str) -> bytes:
    """A line without its digits, as bytes: the memo key of the matcher (and of the scan's own
    gates), equal for lines that differ only in their numbers."""
    return text.encode("utf-8", "surrogatepass").translate(None, _DIGITS)


def normalize_pci(address: str) -> str:
    """``0000:3B:00.0`` / ``00000000:3b:00`` / ``3b:00`` -> ``0000:3b:00`` (domain:bus:device),
    the form NVRM prints, so kernel and NVML evidence about one GPU compare equal."""
    m = _PCI.fullmatch(address.strip())
    if m is None:
        return address.lower()
    domain = address.split(":")[0][-4:] if address.count(":") == 2 else "0000"
    return f"{domain.lower()}:{m.group(1).lower()}:{m.group(2).lower()}"


@functools.cache
def default_matcher() -> Matcher:
    """A matcher over the packaged catalogue, built once per process."""
    return Matcher(load_catalogue())


def _bounded(text: str) -> str:
    if len(text) <= MAX_LINE:
        return text
    return text[: MAX_LINE // 2] + "\n" + text[-(MAX_LINE // 2) :]


def _strip_digits(text: str) -> str:
    return text.translate(_DIGITS_TABLE)


def _to_int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None
