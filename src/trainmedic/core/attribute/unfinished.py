"""Logs that stop half-way through saying something: what the unfinished part still says.

Used only when nothing above spoke (no signature, no cascade, no teardown, no other mechanism),
so each verdict is a low-confidence guess, never a reason to stop or drain:

* **a traceback cut before its exception line**: Python prints "Traceback (most recent call
  last)" only for an exception that is propagating, so the file holds a failure even when the
  excerpt (a thread's paste, a truncated log) lost the line that named it. Where it was raised
  is the innermost frame shown: in the program's own code or a library it calls (a dataset's
  ``__getitem__``, a model's ``forward``), the application (0.3); inside a wait on another
  process or thread (``concurrent.futures``, ``multiprocessing``, ``subprocess``,
  ``threading``, a queue) or inside the distributed / device runtime, the error came from
  elsewhere: a failure of unknown category (0.2); inside the standard library's file-system
  calls (``os``, ``shutil``, ``pathlib``, ``tempfile``), the file system refused the call:
  storage (0.3); so is a cut whose innermost frame's source line calls a built-in file-system
  call itself (``open(...)``, ``os.rename``, ``os.replace``, ``os.mkdir``, ``os.fsync``...):
  those are C functions and print no frame of their own, so the call is the last thing shown.
  A cut inside a remote file system's client (fsspec, s3fs, gcsfs, pyarrow's fs) or the
  network transport it reads through (aiohttp, botocore, urllib3), with that client among
  the frames, is the remote data source failing under the job: storage (0.3). A cut inside a
  device management tool's query (pynvml, DCGM, amdsmi, rocm_smi, tt-smi) is the driver or
  the device's firmware not answering: system_software (0.3).
  An excerpt that begins with a frame is a traceback whose header was cut.
* **an allocation never granted**: the submission's last words are that it waits for its
  allocation (``srun: Pending job allocation``, ``salloc: job N queued and waiting for
  resources``, PBS's ``qsub: waiting for job N to start``, LSF's ``<<Waiting for dispatch>>``)
  and the log ends there, with no grant and no output of the job: the scheduler never started
  it (a limit it counts against, a reservation, nodes it cannot use): a scheduler hang (0.3).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.logparse.summary import ProgressSummary
from trainmedic.core.logparse.timeline import Timeline
from trainmedic.core.model import Category, Kind

WAIT_TAIL = 2
"""At most this many lines after the last "waiting for the allocation" line."""

# Frames of waits on other processes/threads and of the distributed or device runtime: an
# exception raised there was reported from elsewhere (a child, a peer, the device).
_ELSEWHERE = re.compile(
    r"(?:^|/)(?:concurrent/futures|multiprocessing|subprocess\.py|threading\.py|queue\.py"
    r"|selectors\.py|socket\.py|asyncio/|torch/distributed/|torch/cuda/|torch/multiprocessing/"
    r"|jax/_src/(?:distributed|xla_bridge)|torch_xla/|tensorflow/python/(?:eager|distribute)"
    r"|deepspeed/comm/|ray/_private/|ray/_raylet|horovod/)"
)
# Frames of the standard library's file-system calls (os.makedirs, shutil.copyfile,
# pathlib's mkdir, tempfile): an exception raised there is the file system refusing the call
# (exists, permission, space, quota, a stale or racy network mount).
_FILESYSTEM = re.compile(
    r"(?:^|/)(?:<frozen os>|os\.py|shutil\.py|pathlib\.py|pathlib/_\w+\.py|tempfile\.py"
    r"|genericpath\.py)$"
)
# A source line calling a built-in file-system function (C code: no frame of its own follows):
# the bare ``open(``, ``io.open`` / ``os.open``, and ``os``'s calls on paths and descriptors.
# A method named open (``Image.open``, ``h5py.File``, ``zipfile.ZipFile.open``) is a library's.
_FILESYSTEM_CALL = re.compile(
    r"(?:^|[\s=(,\[])(?:(?:io|os|builtins|codecs)\.)?open\("
    r"|\bos\.(?:mkdir|makedirs|rename|renames|replace|remove|unlink|rmdir|fsync|fdatasync"
    r"|truncate|ftruncate|link|symlink|chmod|chown|stat|lstat|listdir|scandir|statvfs|write"
    r"|read|sendfile)\("
)
# Clients of remote file systems and object stores (fsspec and its s3fs/gcsfs/adlfs, pyarrow's
# fs, smart_open, the Hub's file system) and the network transports they read through: a
# traceback that passes through such a client's read and stops inside it or its transport is a
# remote data source (an HTTP range read, an object GET) failing under the job: storage.
_REMOTE_FS = re.compile(
    r"(?:^|/)(?:fsspec|s3fs|gcsfs|adlfs|ocifs|smart_open|pyarrow/fs|huggingface_hub/hf_file_system)"
    r"(?:/|\.py$)"
)
_REMOTE_TRANSPORT = re.compile(
    r"(?:^|/)(?:fsspec|s3fs|gcsfs|adlfs|ocifs|smart_open|aiohttp|aiobotocore|botocore|urllib3"
    r"|requests|httpx|httpcore|http/client\.py|ssl\.py|socket\.py|asyncio/)"
)
# Device management tools and the bindings they query devices through (NVML's pynvml, DCGM's
# Python modules, AMD's amdsmi / rocm_smi, Tenstorrent's tt-smi / tt-flash and their common
# library): an exception raised inside their device queries is the driver or the device's
# firmware not answering them (a driver that lost the device after a suspend, firmware that
# did not boot), which the labelled threads put on the platform's software more often than on
# the part: system_software as a guess (0.3).
_DEVICE_TOOL = re.compile(
    r"(?:^|/)(?:pynvml|nvidia_ml_py|pydcgm|DcgmReader|dcgm_\w+|amdsmi|rocm_smi|rsmiBindings"
    r"|pyrsmi|tt_smi|tt_flash|tt_tools_common)(?:/|\.py$)"
)
_FRAME = re.compile(r"^(?P<path>[^\s:][^:]*):\d+ in ")


def _innermost(frames: Sequence[str]) -> str | None:
    for frame in reversed(frames):
        m = _FRAME.match(frame)
        if m:
            return m.group("path")
    return None


def _innermost_calls_filesystem(frames: Sequence[str]) -> bool:
    """Whether the innermost frame's source line (the line after it) calls a built-in
    file-system function."""
    if len(frames) < 2 or _FRAME.match(frames[-1]) or not _FRAME.match(frames[-2]):
        return False
    return _FILESYSTEM_CALL.search(frames[-1]) is not None


def traceback_cut(timelines: Sequence[Timeline]) -> PhaseFinding | None:
    for tl in timelines:
        if tl.cut_traceback_line is None:
            continue
        path = _innermost(tl.cut_traceback)
        where = f"{tl.source or 'line'}:{tl.cut_traceback_line}"
        if path is None:
            return PhaseFinding(
                Category.UNKNOWN,
                Kind.CRASH,
                0.2,
                f"a traceback at {where} that the log ends inside, with no frame and no "
                "exception line: an exception ended the process, which one is not shown",
            )
        if _FILESYSTEM.search(path):
            return PhaseFinding(
                Category.STORAGE,
                Kind.CRASH,
                0.3,
                f"a traceback at {where} cut before its exception line; its innermost frame "
                f"({path}) is a file-system call of the standard library: the file system "
                "refused it",
            )
        if _innermost_calls_filesystem(tl.cut_traceback):
            return PhaseFinding(
                Category.STORAGE,
                Kind.CRASH,
                0.3,
                f"a traceback at {where} cut before its exception line; its innermost frame "
                f"({path}) calls a built-in file-system function "
                f"({tl.cut_traceback[-1][:80]}): the file system refused it",
            )
        if _REMOTE_TRANSPORT.search(path) and any(
            (m := _FRAME.match(f)) and _REMOTE_FS.search(m.group("path")) for f in tl.cut_traceback
        ):
            return PhaseFinding(
                Category.STORAGE,
                Kind.CRASH,
                0.3,
                f"a traceback at {where} cut before its exception line, inside a remote file "
                f"system's read ({path}): the remote data source (object store, HTTP) failed "
                "under the job",
            )
        if _DEVICE_TOOL.search(path):
            return PhaseFinding(
                Category.SYSTEM_SOFTWARE,
                Kind.CRASH,
                0.3,
                f"a traceback at {where} cut before its exception line, inside a device "
                f"management tool's query of the device ({path}): the driver or the device's "
                "firmware did not answer it",
            )
        if _ELSEWHERE.search(path):
            return PhaseFinding(
                Category.UNKNOWN,
                Kind.CRASH,
                0.2,
                f"a traceback at {where} cut before its exception line; its innermost frame "
                f"({path}) waits on another process or is the runtime's: the error came from "
                "elsewhere",
            )
        return PhaseFinding(
            Category.APPLICATION,
            Kind.CRASH,
            0.3,
            f"a traceback at {where} cut before its exception line; its innermost frame "
            f"({path}) is the program's or a library it calls: an exception raised there "
            "ended the job",
        )
    return None


def allocation_never_granted(
    timelines: Sequence[Timeline], progress: ProgressSummary | None
) -> PhaseFinding | None:
    if progress is not None and progress.reports > 0:
        return None
    for tl in timelines:
        wait = tl.alloc_wait_line
        if wait is None or tl.points:
            continue
        if tl.alloc_granted_line is not None and tl.alloc_granted_line > wait:
            continue
        if tl.lines - wait > WAIT_TAIL:
            continue
        return PhaseFinding(
            Category.SCHEDULER,
            Kind.HANG,
            0.3,
            f"the submission waits for its allocation (line {wait}) and the log ends there: "
            "no grant, no output of the job: the scheduler never started it (a limit it "
            "counts the job against, a reservation, nodes it cannot use)",
        )
    return None
