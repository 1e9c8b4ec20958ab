"""NVLink status listings: a GPU that lost some of its NVLinks.

``nvidia-smi nvlink -s`` prints, per GPU (``GPU 3: Tesla V100-SXM2-32GB (UUID: ...)``), one row
per link: its speed (``Link 0: 25.781 GB/s``) or ``<inactive>``. ``dcgmi nvlink -s`` prints,
under ``gpuId N:``, one letter per link (``U`` up, ``D`` down, ``X`` disabled, ``_`` not
supported). A GPU whose links are partly up and partly down, or whose links are all down while
another GPU of the listing has links up, has lost NVLinks it was built with: a link, its
bridge or the GPU's NVLink block (gpu_hardware), and the collectives crossing it fall back to
slower paths (a straggler). Links of every GPU down (no NVLink bridge, a fabric manager that is
not running) and disabled links are no finding: they say nothing about one GPU.
Read from a snapshot, so a guess (context rule ``nvlink_down_is_a_guess``).
"""

from __future__ import annotations

import re

from trainmedic.core.logparse.structured import Finding
from trainmedic.core.model import ActionHint, Category, Kind, Role

_SMI_GPU = re.compile(r"^\s*GPU (\d+): .*\(UUID: ")
_SMI_LINK = re.compile(r"^\s*Link (\d+): (?:(<inactive>)|[\d.]+ [GM]B/s)\s*$")
_DCGM_GPU = re.compile(r"^\s*gpuId (\d+):\s*$")
_DCGM_OTHER = re.compile(r"^\s*(?:physicalId \d+|NvSwitches|GPUs):\s*$")
_DCGM_ROW = re.compile(r"^\s*([UDX_](?: [UDX_])*)\s*$")


class NvlinkStatusParser:
    triggers: tuple[str, ...] = ("(UUID: ", "<inactive>", " GB/s", " MB/s", "gpuId ")

    __slots__ = ("_current", "_links", "_reported", "active")

    def __init__(self) -> None:
        self.active = False  # inside a dcgmi block: its rows of letters hold no trigger
        self._current: str | None = None
        self._links: dict[str | None, list[int]] = {}  # GPU -> [links up, links down]
        self._reported: set[str | None] = set()

    def feed(self, line_no: int, body: str) -> Finding | None:
        header = _SMI_GPU.match(body) or _DCGM_GPU.match(body)
        if header is not None:
            self._current = header.group(1)
            self.active = _DCGM_GPU.match(body) is not None
            return None
        if _DCGM_OTHER.match(body):
            self._current, self.active = None, False  # a switch's links are not a GPU's
            return None
        link = _SMI_LINK.match(body)
        if link is not None:
            self._count(up=0 if link.group(2) else 1, down=1 if link.group(2) else 0)
            return self._finding(line_no)
        row = _DCGM_ROW.match(body) if self.active else None
        if row is None:
            self.active = False
            return None
        letters = row.group(1).split()
        self._count(up=letters.count("U"), down=letters.count("D"))
        return self._finding(line_no)

    def _count(self, up: int, down: int) -> None:
        counts = self._links.setdefault(self._current, [0, 0])
        counts[0] += up
        counts[1] += down

    def _finding(self, line_no: int) -> Finding | None:
        any_up = any(up for up, _ in self._links.values())
        for gpu, (up, down) in self._links.items():
            if not down or gpu in self._reported or not any_up:
                continue
            self._reported.add(gpu)
            name = f"GPU {gpu}" if gpu is not None else "a GPU"
            state = f"{down} link(s) down, {up} up" if up else f"all {down} link(s) down"
            return Finding(
                signature="nvlink.links_down",
                category=Category.GPU_HARDWARE,
                kind=Kind.STRAGGLER,
                role=Role.PRIMARY,
                line=line_no,
                text=f"{name}: {state} while NVLinks of the listing are up: lost NVLinks",
                gpu=gpu,
                action_hint=ActionHint.RESET_GPU,
            )
        return None
