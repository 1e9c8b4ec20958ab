"""The one seam through which the Slurm adapter runs commands: local CLI, the same commands
over SSH to a head node, or recorded outputs in unit tests.

Every command is an argument list; nothing goes through a shell on our side. Over SSH the
remote shell does see the command, so each argument is ``shlex.quote``d.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from trainmedic.core.errors import SchedulerUnavailable


@dataclass(frozen=True, slots=True)
class CompletedCommand:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class CommandRunner(Protocol):
    def run(self, argv: list[str], timeout: float) -> CompletedCommand:
        """Run ``argv``; SchedulerUnavailable when it cannot be run or times out."""
        ...


def _run(argv: list[str], timeout: float, env: Mapping[str, str] | None) -> CompletedCommand:
    try:
        done = subprocess.run(
            argv,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise SchedulerUnavailable(f"{shlex.join(argv)}: no answer within {timeout:g} s") from None
    except OSError as err:
        raise SchedulerUnavailable(f"{shlex.join(argv)}: cannot run: {err}") from None
    return CompletedCommand(tuple(argv), done.returncode, done.stdout, done.stderr)


class LocalRunner:
    """In-cluster: the Slurm CLI on this host (``SLURM_CONF`` set when given)."""

    def __init__(self, slurm_conf: str | None = None, env: Mapping[str, str] | None = None) -> None:
        base = dict(env if env is not None else os.environ)
        if slurm_conf:
            base["SLURM_CONF"] = slurm_conf
        self.env = base

    def run(self, argv: list[str], timeout: float) -> CompletedCommand:
        return _run(argv, timeout, self.env)


class SshRunner:
    """The same commands on a head node over ssh, with strict host-key checking and no
    password prompts (BatchMode). ``slurm_conf`` is passed as ``env SLURM_CONF=...``."""

    def __init__(
        self,
        host: str,
        *,
        known_hosts: str,
        user: str | None = None,
        port: int = 22,
        identity_file: str | None = None,
        slurm_conf: str | None = None,
        connect_timeout: int = 5,
        ssh_binary: str = "ssh",
        control_dir: str | None = None,
    ) -> None:
        if not host or host.startswith("-") or any(c.isspace() for c in host):
            raise ValueError(f"invalid ssh host {host!r}")
        self.host = host
        self.slurm_conf = slurm_conf
        opts = [
            ssh_binary,
            "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={known_hosts}",
            "-o", f"ConnectTimeout={connect_timeout}",
            "-o", "LogLevel=ERROR",
            "-p", str(port),
        ]  # fmt: skip
        if identity_file:
            opts += ["-i", identity_file, "-o", "IdentitiesOnly=yes"]
        if user:
            opts += ["-l", user]
        if control_dir:
            # One TCP+auth handshake shared by all commands of a cycle; ``close`` ends it.
            # The socket path (dir + 58 chars) must stay under ~100 bytes: use a short dir.
            opts += [
                "-o", "ControlMaster=auto",
                "-o", f"ControlPath={control_dir}/%C",
                "-o", "ControlPersist=60",
            ]  # fmt: skip
        self._prefix = opts
        self._multiplexed = bool(control_dir)

    def remote_argv(self, argv: Sequence[str]) -> list[str]:
        """The ssh command line that runs ``argv`` on the head node."""
        remote = list(argv)
        if self.slurm_conf:
            remote = ["env", f"SLURM_CONF={self.slurm_conf}", *remote]
        return [*self._prefix, self.host, "--", shlex.join(remote)]

    def close(self) -> None:
        """End the shared connection (when ``control_dir`` was given); harmless otherwise."""
        if self._multiplexed:
            _run([*self._prefix, "-O", "exit", self.host], 10, None)

    def run(self, argv: list[str], timeout: float) -> CompletedCommand:
        done = _run(self.remote_argv(argv), timeout, None)
        if done.returncode == 255:  # ssh's own failure: refused, host key, unreachable
            raise SchedulerUnavailable(
                f"ssh {self.host}: {done.stderr.strip() or 'connection failed'}"
            )
        return CompletedCommand(tuple(argv), done.returncode, done.stdout, done.stderr)


Responder = Callable[[list[str]], CompletedCommand]


@dataclass
class FakeRunner:
    """Recorded outputs for unit tests: ``responses`` maps an argv prefix (a tuple) to a result
    or a function of the argv; the longest matching prefix wins. Every call is recorded."""

    responses: dict[tuple[str, ...], CompletedCommand | Responder] = field(default_factory=dict)
    calls: list[list[str]] = field(default_factory=list)

    def add(
        self, prefix: Sequence[str], stdout: str = "", returncode: int = 0, stderr: str = ""
    ) -> None:
        self.responses[tuple(prefix)] = CompletedCommand(tuple(prefix), returncode, stdout, stderr)

    def run(self, argv: list[str], timeout: float) -> CompletedCommand:
        self.calls.append(list(argv))
        best: tuple[str, ...] | None = None
        for prefix in self.responses:
            if tuple(argv[: len(prefix)]) == prefix and (best is None or len(prefix) > len(best)):
                best = prefix
        if best is None:
            raise SchedulerUnavailable(f"{shlex.join(argv)}: no recorded response")
        answer = self.responses[best]
        result = answer(list(argv)) if callable(answer) else answer
        return CompletedCommand(tuple(argv), result.returncode, result.stdout, result.stderr)

    def commands(self, name: str) -> list[list[str]]:
        """The calls whose program (or ``scontrol`` sub-command) is ``name``."""
        return [c for c in self.calls if c[0] == name or c[:2] == ["scontrol", name]]
