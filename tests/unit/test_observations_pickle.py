"""Observations cross from a reader process to the loop pickled (``sources.reader_process``):
each kind comes back equal, as its class rebuilt it, and without the generated per-object
field lookups of a slotted dataclass's ``__getstate__``/``__setstate__``."""

from __future__ import annotations

import dataclasses
import pickle
import typing

import pytest

from trainmedic.core.model import EvidenceSource
from trainmedic.core.observations import Observation
from trainmedic.core.states import JobState, NodeState

SAMPLE: dict[str, object] = {
    "int": 7,
    "int | None": 3,
    "float": 1.25,
    "float | None": None,
    "str": "n1",
    "str | None": "rank-0",
    "bool": True,
    "tuple[float, ...]": (1.5, 2.5),
    "tuple[float, ...] | None": (0.5, 0.25),
    "tuple[int, ...]": (10, 11),
    "tuple[str, ...]": ("a", "b"),
    "EvidenceSource": EvidenceSource.APP_LOG,
    "JobState": JobState.RUNNING,
    "NodeState": NodeState.DOWN,
}


@pytest.mark.parametrize("cls", typing.get_args(Observation), ids=lambda c: c.__name__)
def test_every_observation_comes_back_equal(cls: type) -> None:
    obs = cls(**{f.name: SAMPLE[str(f.type)] for f in dataclasses.fields(cls)})
    back = pickle.loads(pickle.dumps(obs, protocol=pickle.HIGHEST_PROTOCOL))
    assert back == obs and type(back) is cls
    assert type(obs).__reduce__(obs)[0] is cls  # rebuilt by its class, fields in order
