"""A bare exception type yields to the mechanism its message names (``generic`` in the catalogue).

Frameworks raise ValueError/AssertionError/ImportError/TypeError for NCCL, CUDA, disk and
build failures as readily as for a bad config. The type alone says only that the program
raised; where the message matches a mechanism the catalogue knows, that mechanism is the
cause. Where the message names nothing the catalogue knows, the type still decides.
"""

from __future__ import annotations

import builtins
import re
from pathlib import Path

import pytest
from log_verdict import verdict_of

from trainmedic.core.model import Category, Role
from trainmedic.core.signatures.catalogue import load_catalogue
from trainmedic.core.signatures.matcher import default_matcher

_TRACEBACK = 'Traceback (most recent call last):\n  File "train.py", line 41, in <module>\n'
_STEPS = "".join(f"step {i} loss {2.5 - i / 100:.3f} lr 3e-4\n" for i in range(1, 6))

# Messages other catalogue entries already know, each in a bare type's clothes. Those marked
# "before" were attributed to the mechanism already (its entry came first in catalogue order,
# or the wrapper has no bare-type entry); the others were application via the bare type.
MECHANISM_IN_WRAPPER = [
    ("ValueError: Horovod was not built with MPI support", Category.SYSTEM_SOFTWARE),
    ("AssertionError: Torch not compiled with CUDA enabled", Category.SYSTEM_SOFTWARE),
    (
        "ValueError: CUDA error: no kernel image is available for execution on the device",
        Category.SYSTEM_SOFTWARE,
    ),
    ("AssertionError: CUDA error: system not yet initialized", Category.SYSTEM_SOFTWARE),
    (
        "ValueError: Loaded runtime CuDNN library: 7.0.5 but source was compiled with: 7.1.4.",
        Category.SYSTEM_SOFTWARE,
    ),
    (
        "TypeError: CUDA error: system has unsupported display driver / cuda driver combination",
        Category.SYSTEM_SOFTWARE,
    ),
    (
        "ValueError: [Errno 107] Transport endpoint is not connected: '/mnt/gcs/dataset'",
        Category.STORAGE,
    ),
    ("KeyError: '[Errno 121] Remote I/O error: /mnt/share/run7/ckpt_2000.pt'", Category.STORAGE),
    # before: these mechanisms' entries precede sig_python.toml in catalogue order
    ("AssertionError: [Errno 28] No space left on device", Category.STORAGE),
    (
        "ValueError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error, "
        "NCCL version 2.14.3",
        Category.SYSTEM_SOFTWARE,
    ),
    ("ImportError: /lib64/libc.so.6: version `GLIBC_2.34' not found", Category.SYSTEM_SOFTWARE),
    # before: RuntimeError and OSError have no bare-type entry (only py.exception_line, context)
    ("OSError: [Errno 28] No space left on device: '/ckpt/step_100.pt'", Category.STORAGE),
    ("RuntimeError: Distributed package doesn't have NCCL built in", Category.SYSTEM_SOFTWARE),
]


@pytest.mark.parametrize(("line", "category"), MECHANISM_IN_WRAPPER)
def test_mechanism_in_bare_type_names_the_category(
    tmp_path: Path, line: str, category: Category
) -> None:
    verdict = verdict_of(tmp_path, _STEPS + _TRACEBACK + "    hvd.init()\n" + line + "\n")
    assert verdict.failure
    assert verdict.category is category, verdict.basis
    assert verdict.root_cause is not None
    assert not verdict.root_cause.signature.startswith("py."), verdict.root_cause.signature


@pytest.mark.parametrize(
    "line",
    [
        "ValueError: The client socket has failed to connect to [gpu-a01]:29500 "
        "(errno: 111 - Connection refused).",
        "AssertionError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled cuda error, "
        "NCCL version 2.14.3",
    ],
)
def test_a_cascade_or_unnamed_mechanism_is_not_the_jobs_bug(tmp_path: Path, line: str) -> None:
    """A refused connection is what a rank sees when its peer is gone, NCCL's "unhandled cuda
    error" a failed CUDA call inside NCCL (most often the platform under it, a guess): wrapped
    in a ValueError/AssertionError they are still not the program's own bug (today's verdict
    was application at 0.8, advice stop)."""
    verdict = verdict_of(tmp_path, _TRACEBACK + "    dist.init_process_group()\n" + line + "\n")
    assert verdict.failure
    assert verdict.category is not Category.APPLICATION, verdict.basis
    assert verdict.confidence < 0.5


@pytest.mark.parametrize(
    ("line", "signature"),
    [
        ("ValueError: Expected a cuda device, but got: cpu", "py.value_error"),
        ("AssertionError: micro batch size must divide global batch size", "py.assertion_error"),
        ("KeyError: 'optimizer_state'", "py.key_error"),
        ("ImportError: cannot import name 'LlamaConfig' from 'transformers'", "py.import_error"),
        ("TypeError: forward() got an unexpected keyword argument 'position_ids'", "py.type_error"),
        (
            "IndexError: index 50257 is out of bounds for dimension 0 with size 50257",
            "py.index_error",
        ),
    ],
)
def test_unknown_message_the_bare_type_still_decides(
    tmp_path: Path, line: str, signature: str
) -> None:
    verdict = verdict_of(tmp_path, _STEPS + _TRACEBACK + "    main()\n" + line + "\n")
    assert verdict.category is Category.APPLICATION
    assert verdict.root_cause is not None and verdict.root_cause.signature == signature


def test_a_bare_type_before_a_mechanism_elsewhere_keeps_the_order(tmp_path: Path) -> None:
    """Only one line's hits are ranked: an earlier bare-type line is still the first failure."""
    text = (
        _TRACEBACK
        + "    build_model(cfg)\nValueError: num_heads must divide hidden_size\n"
        + _STEPS
        + "RuntimeError: Distributed package doesn't have NCCL built in\n"
    )
    verdict = verdict_of(tmp_path, text)
    assert verdict.category is Category.APPLICATION
    assert verdict.root_cause is not None and verdict.root_cause.signature == "py.value_error"


@pytest.mark.parametrize(
    "text",
    [
        _STEPS + "Horovod: built with MPI support and NCCL support\n" + _STEPS,
        _STEPS + "torch 2.3.0 built with CUDA 12.1, cuDNN 8.9.2; MPI backend available\n" + _STEPS,
        _STEPS + "torch.cuda.is_available(): True, NCCL version 2.18.1\n" + _STEPS,
    ],
)
def test_healthy_lines_stay_healthy(tmp_path: Path, text: str) -> None:
    assert not verdict_of(tmp_path, text).failure


# --- the catalogue data and the matcher's rule, tied together --------------------------------

_BUILTIN_EXCEPTIONS = sorted(
    name
    for name in dir(builtins)
    if isinstance(getattr(builtins, name), type)
    and issubclass(getattr(builtins, name), BaseException)
)
_TYPE_NAMES_MECHANISM = {"MemoryError": "the process's heap ran out (py.memory_error)"}
"""Builtin types whose name is itself a mechanism: matched with any message, yet not generic."""
_NOTHING = "zq qz unrelated words"


def test_every_bare_builtin_type_entry_is_generic() -> None:
    """An entry that matches a builtin exception type with a message naming nothing is a bare
    type, so it must say ``generic = true``; and every generic entry is such an entry."""
    catalogue = load_catalogue()
    matcher = default_matcher()
    bare: set[str] = set()
    for name in _BUILTIN_EXCEPTIONS:
        if name in _TYPE_NAMES_MECHANISM:
            continue
        for hit in matcher.match(f"{name}: {_NOTHING}"):
            if hit.signature.role in (Role.PRIMARY, Role.CASCADE):
                bare.add(hit.signature.id)
    generic = {s.id for s in catalogue.signatures if s.generic}
    missing = {i for i in bare if not catalogue.by_id(i).generic}
    assert not missing, f"bare exception-type entries without generic = true: {sorted(missing)}"
    for signature_id in generic:
        signature = catalogue.by_id(signature_id)
        assert signature.category is Category.APPLICATION, signature_id
        assert signature.role in (Role.PRIMARY, Role.CONTEXT), signature_id
        typed = re.match(
            r"(?:\[\w+\]: )?([\w.]*(?:Error|Exception|Interrupt))\b", signature.examples[0]
        )
        assert typed is not None, f"{signature_id}: first example should open with its type"
        assert any(
            h.signature.id == signature_id for h in matcher.match(f"{typed.group(1)}: {_NOTHING}")
        ), f"{signature_id} is generic but does not take any message"


def test_every_mechanism_outranks_every_bare_type_on_its_line() -> None:
    """Each mechanism entry's first example, wrapped in each generic entry's type: the bare
    type's event is context wherever the mechanism still matches, and a primary otherwise."""
    catalogue = load_catalogue()
    matcher = default_matcher()
    types = []
    for signature in catalogue.signatures:
        if signature.generic and signature.role is Role.PRIMARY:
            typed = re.match(r"(?:\[\w+\]: )?(\w+)", signature.examples[0])
            assert typed is not None
            types.append(typed.group(1))
    checked = 0
    for mechanism in catalogue.signatures:
        if mechanism.generic or mechanism.role not in (Role.PRIMARY, Role.CASCADE):
            continue
        for type_name in types:
            hits = matcher.match(f"{type_name}: {mechanism.examples[0].strip()}")
            named = any(
                not h.signature.generic and h.signature.role in (Role.PRIMARY, Role.CASCADE)
                for h in hits
            )
            for hit in hits:
                if hit.signature.generic:
                    assert hit.outranked is named, (mechanism.id, type_name)
                    checked += named
    assert checked > 1000  # most mechanisms still match inside a wrapper
