"""Fires the faults of ``faults.py`` inside the example trainer, one rank's view.

The injector is called once per iteration before compute. Reading the control file costs a
``stat`` per iteration; it is parsed again only when its mtime or size changes. Terminal faults
never return (exit, raise, SIGKILL, hang); ``slow`` and ``nan`` come back as ``StepEffects``.
Every firing is appended to ``<run_dir>/faults.log`` (JSONL) so a harness knows when a fault
really happened; nothing about the injection is written to the job's own stdout.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from trainmedic.demo.trainer.faults import Fault, FaultType, parse_faults
from trainmedic.demo.trainer.rank_log import RankLog

# PCI bus ids of the (pretend) GPUs and the IB HCA of a node, by local rank.
_GPU_BUS = ("0000:3b:00", "0000:5e:00", "0000:86:00", "0000:af:00")
_HCA_BUS = "0000:5e:00.0"


@dataclass(frozen=True, slots=True)
class StepEffects:
    slow_s: float = 0.0
    nan: bool = False


NO_EFFECTS = StepEffects()


class FaultInjector:
    def __init__(
        self,
        run_dir: Path,
        log: RankLog,
        local_rank: int,
        attempt: int,
        kernel_log: Path,
        env_text: str = "",
    ) -> None:
        self._control = run_dir / "faults.json"
        self._fired_dir = run_dir / "faults.fired"
        self._history = run_dir / "faults.log"
        self._log = log
        self._local_rank = local_rank
        self._attempt = attempt
        self._kernel_log = kernel_log
        self._env_faults = parse_faults(env_text, "TRAINMEDIC_FAULTS") if env_text else ()
        self._file_faults: tuple[Fault, ...] = ()
        self._file_key: tuple[int, int] | None = None
        self._done: set[str] = set()  # fired (or claimed elsewhere) in this process
        self._slow_since: dict[str, int] = {}

    # -- control file -------------------------------------------------------------------

    def refresh(self) -> None:
        """Re-read faults.json if it changed; a bad file is reported once and ignored."""
        try:
            st = os.stat(self._control)
        except FileNotFoundError:
            self._file_faults, self._file_key = (), None
            return
        key = (st.st_mtime_ns, st.st_size)
        if key == self._file_key:
            return
        self._file_key = key
        try:
            self._file_faults = parse_faults(self._control.read_text(), str(self._control))
        except (OSError, ValueError) as exc:
            self._log.line(f"WARNING: ignoring fault control file: {exc}")
            self._file_faults = ()

    def faults(self) -> tuple[Fault, ...]:
        return self._env_faults + self._file_faults

    # -- per iteration ------------------------------------------------------------------

    def step_effects(self, iteration: int) -> StepEffects:
        """Fire what is due at ``iteration``; return the non-terminal effects."""
        slow_s, nan = 0.0, False
        for fault in self.faults():
            if not fault.matches(self._log.node, self._log.rank):
                continue
            if fault.type is FaultType.SLOW:
                slow_s += self._slow(fault, iteration)
            elif self._due(fault, iteration) and self._claim(fault, iteration):
                if fault.type is FaultType.NAN:
                    nan = True
                else:
                    self._fire_terminal(fault, iteration)
        if slow_s == 0.0 and not nan:
            return NO_EFFECTS
        return StepEffects(slow_s=slow_s, nan=nan)

    def _due(self, fault: Fault, iteration: int) -> bool:
        if fault.id in self._done:
            return False
        if fault.at_iter is None:
            return True
        if fault.one_shot:
            return iteration >= fault.at_iter
        return iteration == fault.at_iter

    def _slow(self, fault: Fault, iteration: int) -> float:
        start = self._slow_since.get(fault.id)
        if start is None:
            if not (self._due(fault, iteration) and self._claim(fault, iteration)):
                return 0.0
            start = self._slow_since[fault.id] = iteration
        if fault.duration_iters is not None and iteration >= start + fault.duration_iters:
            return 0.0
        return fault.slow_s

    def _claim(self, fault: Fault, iteration: int) -> bool:
        """Mark the fault fired; for one-shot faults win the O_EXCL claim or skip it forever."""
        self._done.add(fault.id)
        record = {
            "id": fault.id,
            "type": fault.type.value,
            "node": self._log.node,
            "rank": self._log.rank,
            "iteration": iteration,
            "attempt": self._attempt,
            "time": time.time(),
        }
        line = json.dumps(record) + "\n"
        if fault.one_shot:
            self._fired_dir.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(self._fired_dir / fault.id, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                return False
            os.write(fd, line.encode())
            os.close(fd)
        fd = os.open(self._history, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(fd, line.encode())
        os.close(fd)
        return True

    # -- terminal faults ----------------------------------------------------------------

    def _fire_terminal(self, fault: Fault, iteration: int) -> None:
        kind = fault.type
        if kind is FaultType.SIGKILL:
            os.kill(os.getpid(), signal.SIGKILL)
        if kind is FaultType.HANG:
            parent = os.getppid()
            # Stuck before the collective: the peers block in allreduce. Only the launcher's
            # death ends it, so a killed torchrun leaves no orphan spinning here.
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(1)
        if kind is FaultType.EXIT:
            pid = os.getpid() + 1
            self._log.line(f"RuntimeError: DataLoader worker (pid(s) {pid}) exited unexpectedly")
            raise SystemExit(1)
        if kind is FaultType.EXCEPTION:
            _project_features()
        if kind is FaultType.APP_ERROR:
            if fault.error == "key":
                _load_decoder_weights()
            _decode_sample(iteration)
        if kind is FaultType.XID79:
            self._kernel(
                f"NVRM: Xid (PCI:{self._gpu()}): 79, pid={os.getpid()}, name=python, "
                "GPU has fallen off the bus.",
                f"NVRM: GPU {self._gpu()}.0: GPU has fallen off the bus.",
            )
            os.kill(os.getpid(), signal.SIGKILL)
        if kind is FaultType.XID48:
            self._kernel(
                f"NVRM: Xid (PCI:{self._gpu()}): 48, pid={os.getpid()}, name=python, "
                "An uncorrectable double bit error (DBE) has been detected on GPU in "
                "the framebuffer at partition 2, subpartition 1.",
                f"NVRM: GPU {self._gpu()}.0: uncorrectable ECC error detected "
                "(row remapping pending)",
            )
            raise RuntimeError(
                "CUDA error: uncorrectable ECC error encountered\n"
                "CUDA kernel errors might be asynchronously reported at some other API call, "
                "so the stacktrace below might be incorrect.\n"
                "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
                "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
            )
        if kind is FaultType.IB_PORT:
            self._ib_port()
        raise AssertionError(f"unhandled fault type {kind}")  # pragma: no cover

    def _gpu(self) -> str:
        return _GPU_BUS[self._local_rank % len(_GPU_BUS)]

    def _kernel(self, *messages: str) -> None:
        """Append kernel-log lines for this node, the way rsyslog writes kern.log."""
        stamp = datetime.now(UTC).isoformat(timespec="microseconds")
        text = "".join(f"{stamp} {self._log.node} kernel: {m}\n" for m in messages)
        self._kernel_log.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._kernel_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(fd, text.encode())
        os.fsync(fd)
        os.close(fd)

    def _ib_port(self) -> None:
        self._kernel(
            f"mlx5_core {_HCA_BUS}: mlx5_port_module_event:1157:(pid 0): Port module "
            "event[error]: module 0, Cable error, Bad or shorted cable/module",
            f"mlx5_core {_HCA_BUS}: mlx5_0: IB port error: port 1 state changed "
            "ACTIVE -> DOWN (physical link down)",
        )
        host, pid = socket.gethostname(), os.getpid()
        self._log.line(
            f"{host}:{pid}:{pid + 7} [{self._local_rank}] transport/net_ib.cc:1696 NCCL WARN "
            "NET/IB : Got completion from peer 10.0.0.2<45123> with status=12 opcode=0 len=0 "
            "vendor err 129 (Recv) localGid ::ffff:10.0.0.1 remoteGid ::ffff:10.0.0.2"
        )
        raise RuntimeError(
            f"NCCL communicator was aborted on rank {self._log.rank}. Original reason for "
            "failure was: NCCL error: remote process exited or there was a network error, "
            "NCCL version 2.21.5\nncclRemoteError: A call failed possibly due to a network "
            "error or a remote process exiting prematurely.\nLast error:\nNET/IB : Got "
            "completion from peer 10.0.0.2<45123> with status=12 opcode=0 len=0 vendor err 129"
        )


# Deterministic application errors: real Python errors raised by real code paths, so the
# traceback looks like one from a training script.


def _project_features() -> None:
    import torch

    features = torch.ones(8, 16)
    projection = torch.ones(32, 4)
    _ = features @ projection  # RuntimeError: mat1 and mat2 shapes cannot be multiplied


def _load_decoder_weights() -> None:
    state_dict = {f"decoder.layers.{i}.weight": i for i in range(12)}
    for layer in range(13):
        _ = state_dict[f"decoder.layers.{layer}.weight"]  # KeyError: 'decoder.layers.12.weight'


def _decode_sample(iteration: int) -> None:
    record = {"index": str(iteration), "label": "n/a"}
    _ = int(record["label"])  # ValueError: invalid literal for int() with base 10: 'n/a'
