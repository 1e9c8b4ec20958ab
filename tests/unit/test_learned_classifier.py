"""The learned evidence layer's pure parts: features, the classifier, and how a verdict uses it."""

from __future__ import annotations

import math
from dataclasses import replace

from trainmedic.core.attribute.learned import (
    GUESS_BELOW,
    LEARNED_CONFIDENCE,
    OVERRULE_SHARE,
    LearnedModel,
    apply_learned,
)
from trainmedic.core.attribute.learned_model import Example, TextModel, train
from trainmedic.core.attribute.learned_text import LineSample, features, sample_text, words
from trainmedic.core.model import NO_FAILURE, Category, Implicated, Kind, Verdict


def test_words_hide_hosts_paths_and_numbers() -> None:
    seq = words(
        "slurmstepd: error: *** JOB 123 ON gpu-node-017.cluster.example.com CANCELLED AT "
        "2024-01-01T00:00:00 DUE TO TIME LIMIT *** /scratch/alice/run7/out.log rank3 0x1f"
    )
    assert "<host>" in seq and "<path>" in seq
    assert not any(ch.isdigit() for w in seq for ch in w)
    assert "alice" not in seq and "scratch" not in seq and "example" not in seq
    assert {"cancelled", "time", "limit"} <= set(seq)


def test_features_are_words_and_pairs() -> None:
    feats = features(["CUDA error: an illegal memory access was encountered"])
    assert "w:illegal" in feats and "b:illegal memory" in feats
    assert features(["same line", "same line"]) == features(["same line"])


def test_sample_keeps_head_and_tail_only() -> None:
    sample = LineSample(head=2, tail=3)
    for i in range(10):
        sample.add(f"line {i}\n".encode())
    assert sample.lines() == ("line 0", "line 1", "line 7", "line 8", "line 9")
    assert sample_text("a\nb\n") == ("a", "b")


def _examples() -> list[Example]:
    rows = [
        ("nfs server not responding still trying", "storage", "s1"),
        ("nfs server not responding timed out", "storage", "s2"),
        ("lustre client evicted server not responding", "storage", "s3"),
        ("gpu has fallen off the bus xid", "gpu_hardware", "s1"),
        ("xid gpu fallen off the bus reset", "gpu_hardware", "s2"),
        ("xid double bit ecc gpu", "gpu_hardware", "s3"),
        ("epoch loss accuracy step done", "none", "s1"),
        ("epoch loss step done saved", "none", "s2"),
        ("epoch accuracy loss step", "none", "s3"),
    ]
    return [Example(features([text]), label, group) for text, label, group in rows]


def test_naive_bayes_learns_and_is_deterministic() -> None:
    model = train(_examples())
    post = model.posterior(features(["nfs: server not responding"]))
    assert max(post, key=lambda c: post[c]) == "storage"
    assert math.isclose(sum(post.values()), 1.0)
    assert train(list(reversed(_examples()))).to_json() == model.to_json()
    assert TextModel.from_json(model.to_json()) == model


def test_failure_score_is_a_mean_per_word() -> None:
    model = train(_examples())
    failing = features(["gpu has fallen off the bus, xid"])
    assert model.failure_score(failing) > 0 > model.failure_score(features(["epoch loss step"]))
    assert model.failure_score(features(["words nobody trained on"])) == 0.0
    # Saying the same thing twice as long does not make it more of a failure.
    longer = features(["gpu has fallen off the bus, xid", "gpu has fallen off the bus, xid"])
    assert math.isclose(model.failure_score(longer), model.failure_score(failing))


def test_features_of_one_set_only_are_dropped() -> None:
    extra = Example(features(["frontier frontier-only words"]), "storage", "s1")
    extra2 = Example(features(["frontier words again"]), "storage", "s1")
    extra3 = Example(features(["frontier and more"]), "storage", "s1")
    model = train([*_examples(), extra, extra2, extra3])
    assert "w:frontier" not in model.counts
    assert "w:nfs" not in train(_examples(), max_features=0).counts


def _model(failure_above: float = math.inf) -> LearnedModel:
    return LearnedModel(train(_examples()), failure_above)


UNNAMED = Verdict(
    failure=True,
    kind=Kind.HANG,
    category=Category.UNKNOWN,
    confidence=0.2,
    implicated=Implicated(nodes=("n1",), ranks=(2,)),
    basis="evidence: 1 failure line(s) no signature knows, none naming a category",
)


def test_an_unnamed_failure_is_named_low_and_implicates_no_node() -> None:
    named = apply_learned(UNNAMED, ["nfs: server not responding, still trying"], _model())
    assert named.category is Category.STORAGE and named.kind is Kind.HANG
    assert named.confidence <= 0.3 <= LEARNED_CONFIDENCE
    assert named.implicated.nodes == () and named.implicated.ranks == (2,)
    assert "learned evidence layer" in named.basis


def test_what_the_layers_concluded_is_left_alone() -> None:
    lines = ["nfs: server not responding, still trying"]
    on_purpose = Verdict(
        True, Kind.HANG, Category.UNKNOWN, 0.3, basis="mechanism (blocked task): no subsystem"
    )
    named = Verdict(True, Kind.CRASH, Category.APPLICATION, 0.8, basis="catalogue: root cause")
    for verdict in (on_purpose, named, NO_FAILURE):
        assert apply_learned(verdict, lines, _model()) is verdict
    assert apply_learned(UNNAMED, lines, None) is UNNAMED
    assert apply_learned(UNNAMED, [], _model()) is UNNAMED


def test_calling_a_failure_needs_the_switch_and_the_threshold() -> None:
    lines = ["gpu has fallen off the bus, xid"]
    assert apply_learned(NO_FAILURE, lines, _model(0.0)) is NO_FAILURE
    called = apply_learned(NO_FAILURE, lines, _model(0.0), call_failures=True)
    assert called.failure and called.category is Category.GPU_HARDWARE
    assert called.confidence <= LEARNED_CONFIDENCE and called.implicated == Implicated()
    healthy = ["epoch 3 loss 0.12 accuracy 0.9 step done"]
    assert apply_learned(NO_FAILURE, healthy, _model(0.0), call_failures=True) is NO_FAILURE
    strict = _model(1000.0)
    assert apply_learned(NO_FAILURE, lines, strict, call_failures=True) is NO_FAILURE


GUESS = Verdict(
    failure=True,
    kind=Kind.CRASH,
    category=Category.APPLICATION,
    confidence=0.45,
    implicated=Implicated(nodes=("n1",), ranks=(0,)),
    basis="catalogue: root cause py.exception_line",
)


def test_a_guess_is_overruled_when_the_words_read_as_another_failure() -> None:
    lines = ["OSError: nfs server not responding, still trying"]
    assert apply_learned(GUESS, lines, _model()) is GUESS  # off by default (see SECOND_OPINION)
    second = apply_learned(GUESS, lines, _model(), second_opinion=True)
    assert second.category is Category.STORAGE and second.kind is Kind.CRASH
    assert second.confidence <= LEARNED_CONFIDENCE < GUESS_BELOW
    assert second.implicated.nodes == () and second.implicated.ranks == (0,)
    assert "a guess (application, 0.45) overruled by learned evidence layer" in second.basis


def test_a_guess_the_words_agree_with_or_a_sure_verdict_stands() -> None:
    storage_guess = replace(GUESS, category=Category.STORAGE)
    lines = ["nfs server not responding, still trying"]
    on = {"second_opinion": True}
    assert apply_learned(storage_guess, lines, _model(), **on) is storage_guess
    sure = replace(GUESS, confidence=GUESS_BELOW)
    assert apply_learned(sure, lines, _model(), **on) is sure
    # Words no class owns more than another leave the guess alone.
    assert apply_learned(GUESS, ["words nobody trained on"], _model(), **on) is GUESS


def test_a_split_reading_does_not_overrule() -> None:
    # Half storage, half GPU words: no failure class holds the share a reversal needs.
    lines = ["nfs server not responding", "gpu has fallen off the bus xid"]
    model = _model()
    post = model.text.posterior(features(lines))
    failure = {c: p for c, p in post.items() if c != "none"}
    share = max(failure.values()) / sum(failure.values())
    verdict = apply_learned(GUESS, lines, model, second_opinion=True)
    assert (verdict is GUESS) == (share <= OVERRULE_SHARE)
