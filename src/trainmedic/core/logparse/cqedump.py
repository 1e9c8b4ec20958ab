"""An RDMA completion-with-error dump: ``mlx5: HOST: got completion with error:`` and the CQE.

libmlx5 (rdma-core) prints no status name when a work request completes in error: it prints
its host name and the 64-byte error CQE as four rows of four 32-bit words. The CQE's last row
holds the syndrome (byte 0x37: the low byte of the row's second word; the byte before it is
the vendor syndrome, what NCCL and Open MPI call "vendor err"). The syndrome says which side
failed, as ``ibv_wc_status`` does for the other wordings (``nccl.ib_completion_error`` and
``nccl.ib_registration_error`` in the catalogue): a protection, access, length or invalid
request error is how memory registration or queue-pair use fails (the software stack); a
retry-exceeded, bad response or remote abort is the link or the peer's NIC not answering. A
flushed request (0x05) only follows another error and says nothing of its own.
"""

from __future__ import annotations

import re

from trainmedic.core.logparse.structured import Finding
from trainmedic.core.model import ActionHint, Category, EvidenceSource, Kind, Role

_HEADER = re.compile(r"\bmlx[45]: ?[\w.\-]*: got completion with error:?\s*$")
_ROW = re.compile(r"^\s*(?:[0-9a-fA-F]{8}\s+){3}[0-9a-fA-F]{8}\s*$")

# mlx5dv.h's MLX5_CQE_SYNDROME_* values, by the side that failed
_SOFTWARE = {0x01, 0x02, 0x04, 0x06, 0x11, 0x12, 0x13, 0x14}
_FABRIC = {0x10, 0x15, 0x16, 0x22}


class CqeDumpParser:
    triggers: tuple[str, ...] = ("got completion with error",)

    __slots__ = ("_header", "_rows", "active")

    def __init__(self) -> None:
        self.active = False
        self._header = 0  # line of the dump's header
        self._rows = 0  # CQE rows read after it

    def feed(self, line_no: int, body: str) -> Finding | None:
        if _HEADER.search(body):
            self.active, self._header, self._rows = True, line_no, 0
            return None
        if not self.active:
            return None
        if not _ROW.match(body):
            self.active = False  # the dump was cut: nothing to decode
            return None
        self._rows += 1
        if self._rows < 4:
            return None
        self.active = False
        syndrome = int(body.split()[1], 16) & 0xFF
        return _finding(self._header, syndrome, body.strip())


def _finding(line: int, syndrome: int, text: str) -> Finding | None:
    if syndrome in _SOFTWARE:
        category, hint, name = Category.SYSTEM_SOFTWARE, ActionHint.FIX_CONFIG, "access_error"
    elif syndrome in _FABRIC:
        category, hint, name = Category.NETWORK_HARDWARE, ActionHint.CHECK_NETWORK, "transport"
    else:
        return None
    return Finding(
        signature=f"cqedump.{name}",
        category=category,
        kind=Kind.CRASH,
        role=Role.PRIMARY,
        line=line,
        text=f"CQE syndrome 0x{syndrome:02x}: {text}"[:300],
        evidence=EvidenceSource.APP_LOG,
        action_hint=hint,
    )
