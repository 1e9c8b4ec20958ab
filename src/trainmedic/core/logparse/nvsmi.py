"""``nvidia-smi -q`` and ``dcgmi diag`` output: what NVIDIA's own tools say about each GPU.

``nvidia-smi -q`` prints, per GPU (``GPU 00000000:3B:00.0``), nested sections of counters; a
failure is a non-zero *uncorrectable* ECC count (volatile or aggregate), a retirement or row
remap still pending (the GPU needs a reset), or a failed remap (it needs replacing); on an
NVLink-fabric system (GB200/NVL, HGX with NVSwitch) a ``Fabric`` section whose registration
ended (``State: Completed``) with a ``Status`` other than ``Success``: the GPU is not part of
its NVLink domain (clique 0, zero cluster UUID), which the image's own validation treats as a
GPU node to take out.
``dcgmi diag`` prints a table of tests; a ``Fail`` row names what failed: a deployment check
(libraries, permissions, another process on the GPU) is the platform's, any other test the GPU's.
"""

from __future__ import annotations

import re

from trainmedic.core.logparse.structured import Finding
from trainmedic.core.model import ActionHint, Category, Kind, Role

_GPU = re.compile(r"^\s*GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*$")
_KV = re.compile(r"^\s*([A-Za-z][\w /()-]*?)\s*:\s*(\S.*?)\s*$")
_SECTIONS = ("ECC Errors", "Retired Pages", "Remapped Rows", "Page Retirement", "Fabric")
_FABRIC_FINE = frozenset({"success", "n/a", "not supported"})
"""Fabric statuses of a GPU that registered, or of one that has no NVLink fabric to join."""
_MAX_QUIET = 400
"""Lines of one GPU's report: a block ends when none of its keys has been seen for this long."""


def _count(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        return 0  # "N/A", "Disabled"


class NvidiaSmiParser:
    triggers: tuple[str, ...] = (
        "NVSMI LOG",
        "ECC Errors",
        "Retired Pages",
        "Remapped Rows",
        "Fabric",
    )

    __slots__ = ("_bit", "_fabric_state", "_gpu", "_quiet", "_reported", "_section", "active")

    def __init__(self) -> None:
        self.active = False
        self._gpu: str | None = None
        self._section = ""
        self._bit = ""  # "Single Bit" / "Double Bit" (older ECC layout)
        self._fabric_state = ""  # the Fabric section's State, read before its Status
        self._quiet = 0
        self._reported: set[tuple[str | None, str]] = set()

    def feed(self, line_no: int, body: str) -> Finding | None:
        self.active = True
        stripped = body.strip()
        gpu = _GPU.match(body)
        if gpu:
            self._gpu, self._section, self._bit, self._quiet = gpu.group(1), "", "", 0
            self._fabric_state = ""
            return None
        self._quiet += 1
        if self._quiet > _MAX_QUIET:
            self.active = False
            return None
        if stripped in _SECTIONS:
            self._section, self._bit, self._quiet = stripped, "", 0
            return None
        if stripped in ("Single Bit", "Double Bit"):
            self._bit = stripped
            return None
        kv = _KV.match(body)
        if kv is None:
            return None
        key, value = kv.group(1), kv.group(2)
        what = self._judge(key, value)
        if what is None:
            return None
        self._quiet = 0
        if (self._gpu, what) in self._reported:
            return None
        self._reported.add((self._gpu, what))
        return Finding(
            signature=f"nvsmi.{what}",
            category=Category.GPU_HARDWARE,
            kind=Kind.CRASH,
            role=Role.PRIMARY,
            line=line_no,
            text=f"GPU {self._gpu or '?'}: {self._section} {self._bit} {key}: {value}".replace(
                "  ", " "
            ),
            gpu=self._gpu,
            action_hint=ActionHint.RESET_GPU,
        )

    def _judge(self, key: str, value: str) -> str | None:
        """The finding a counter or flag stands for, if it is one."""
        section, yes = self._section, value.lower() == "yes"
        if section == "ECC Errors":
            if "Uncorrectable" in key or (self._bit == "Double Bit" and key in ("Total",)):
                return "ecc_uncorrectable" if _count(value) > 0 else None
            return None
        if section in ("Retired Pages", "Page Retirement") and key.startswith("Pending") and yes:
            return "retirement_pending"
        if section == "Fabric":
            if key == "State":
                self._fabric_state = value.lower()
            elif key == "Status" and self._fabric_state == "completed":
                return None if value.lower() in _FABRIC_FINE else "fabric_registration_failed"
            return None
        if section == "Remapped Rows":
            if key == "Pending" and yes:
                return "remap_pending"
            if key.startswith("Remapping Failure") and yes:
                return "remap_failed"
        return None


# dcgmi diag test name (as its table prints it, lower case) -> category of a Fail row. The
# deployment checks fail on the node's software; every other test exercises the GPU itself.
DCGMI_PLATFORM_TESTS = frozenset(
    {
        "denylist",
        "blacklist",
        "nvml library",
        "cuda main library",
        "cuda toolkit libraries",
        "cuda toolkit library",
        "permissions and os blocks",
        "permissions and os-related blocks",
        "persistence mode",
        "environment variables",
        "graphics processes",
        "software",
    }
)
_DCGMI_ROW = re.compile(r"^\s*\|\s*([^|]*?[A-Za-z][^|]*?)\s*\|\s*(Fail\b[^|]*?)\s*\|")


class DcgmiDiagParser:
    triggers: tuple[str, ...] = ("| Fail",)

    __slots__ = ("active",)

    def __init__(self) -> None:
        self.active = False  # every row stands alone

    def feed(self, line_no: int, body: str) -> Finding | None:
        row = _DCGMI_ROW.match(body)
        if row is None:
            return None
        test = row.group(1).strip().lower()
        platform = test in DCGMI_PLATFORM_TESTS
        return Finding(
            signature="dcgmi.diag_fail_platform" if platform else "dcgmi.diag_fail_gpu",
            category=Category.SYSTEM_SOFTWARE if platform else Category.GPU_HARDWARE,
            kind=Kind.CRASH,
            role=Role.PRIMARY,
            line=line_no,
            text=body.strip(),
            action_hint=ActionHint.FIX_CONFIG if platform else ActionHint.RESET_GPU,
        )
