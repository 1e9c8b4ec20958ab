"""How an analysis is shown: the JSON contract of ``analyze --json`` and the human report."""

from __future__ import annotations

from typing import Any

from trainmedic.core.model import Event
from trainmedic.offline.analyze import AnalysisResult

MAX_CASCADES = 50
MAX_TEXT = 1000


def _event_ref(event: Event) -> dict[str, Any]:
    ref: dict[str, Any] = {
        "signature": event.signature,
        "line": event.line,
        "text": event.text[:MAX_TEXT],
        "file": event.source,
        "evidence": str(event.evidence),
    }
    for key in ("rank", "node", "gpu", "xid", "timestamp"):
        value = getattr(event, key)
        if value is not None:
            ref[key] = value
    return ref


def to_json_dict(result: AnalysisResult) -> dict[str, Any]:
    """The object ``analyze --json`` prints (DESIGN.md's contract, plus a few extras)."""
    v, a = result.verdict, result.advice
    cascades = [
        {"signature": e.signature, "line": e.line, "file": e.source}
        for e in v.cascades[:MAX_CASCADES]
    ]
    return {
        "source": result.source,
        "failure": v.failure,
        "kind": str(v.kind),
        "category": str(v.category),
        "confidence": round(v.confidence, 3),
        "root_cause": _event_ref(v.root_cause) if v.root_cause is not None else None,
        "implicated": {
            "nodes": list(v.implicated.nodes),
            "ranks": list(v.implicated.ranks),
            "gpus": list(v.implicated.gpus),
        },
        "cascades": cascades,
        "cascades_total": len(v.cascades),
        "advice": {
            "action": str(a.action),
            "exclude_nodes": list(a.exclude_nodes),
            "drain_nodes": list(a.drain_nodes),
            "basis": a.basis,
        },
        "basis": v.basis,
        "files": list(result.files),
        "lines": result.lines,
        "last_iteration": result.progress.last_iteration,
        "last_checkpoint": result.progress.last_checkpoint,
        "skipped": list(result.skipped),
        "suspects": [_event_ref(e) for e in result.suspects],
    }


def format_text(result: AnalysisResult) -> str:
    """A short report for a person: verdict, the root-cause line in its context, advice."""
    v, a = result.verdict, result.advice
    out = [f"== {result.source} ({len(result.files)} file(s), {result.lines} lines)"]
    if not v.failure:
        out.append("no failure found (kind none)")
    else:
        out.append(f"failure: {v.kind}   category: {v.category}   confidence: {v.confidence:.2f}")
    root = v.root_cause
    if root is not None:
        where = f"{root.source}:{root.line}" if root.source else f"line {root.line}"
        out.append(f"root cause: {root.signature} ({root.evidence}) at {where}")
        window = result.windows.get(root, ((root.line, root.text),))
        for line_no, text in window:
            mark = ">>" if line_no == root.line else "  "
            out.append(f"  {mark} {line_no:>7} | {text[:200]}")
    imp = v.implicated
    if imp.nodes or imp.ranks or imp.gpus:
        out.append(
            "implicated: "
            + "; ".join(
                f"{name} {', '.join(map(str, values))}"
                for name, values in (("nodes", imp.nodes), ("ranks", imp.ranks), ("gpus", imp.gpus))
                if values
            )
        )
    if v.cascades:
        names = sorted({e.signature for e in v.cascades})
        out.append(f"cascades/teardown: {len(v.cascades)} line(s) ({', '.join(names[:6])})")
    if v.basis:
        out.append(f"why: {v.basis}")
    advice = f"advice: {a.action}"
    if a.exclude_nodes:
        advice += f" exclude={','.join(a.exclude_nodes)}"
    if a.drain_nodes:
        advice += f" drain={','.join(a.drain_nodes)}"
    out.append(f"{advice} ({a.basis})")
    if result.progress.last_iteration is not None:
        out.append(
            f"progress: last iteration {result.progress.last_iteration}, "
            f"last checkpoint {result.progress.last_checkpoint}"
        )
    for suspect in result.suspects:
        where = f"{suspect.source}:{suspect.line}" if suspect.source else f"line {suspect.line}"
        out.append(f"worth checking: {suspect.signature} at {where}: {suspect.text[:160]}")
    for skipped in result.skipped:
        out.append(f"skipped: {skipped}")
    return "\n".join(out)
