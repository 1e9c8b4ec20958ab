"""Make sure Debian's Slurm and munge are present (installing them when we are root)."""

from __future__ import annotations

import os
import shutil
import subprocess

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
# binary -> the package that provides it
BINARIES = {
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sbatch": "slurm-client",
    "squeue": "slurm-client",
    "munged": "munge",
    "mungekey": "munge",
}
_SBIN = ("/usr/sbin", "/sbin", "/usr/bin", "/bin")


class SlurmLabUnavailable(RuntimeError):
    """The lab cluster cannot run here (packages missing and not root, a daemon failed);
    the message says why, so a test can skip with it."""


def find_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in _SBIN:
        path = os.path.join(d, name)
        if os.access(path, os.X_OK):
            return path
    return None


def missing_packages() -> list[str]:
    return sorted({pkg for binary, pkg in BINARIES.items() if find_binary(binary) is None})


def ensure_installed(install: bool = True) -> None:
    """Install the missing packages with apt-get as root; raise SlurmLabUnavailable otherwise."""
    missing = missing_packages()
    if not missing:
        return
    if not install or os.geteuid() != 0:
        raise SlurmLabUnavailable(
            f"Slurm lab needs Debian packages {' '.join(missing)}; not installed and "
            "not root (run scripts/bootstrap.sh as root)"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
    ):
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
            raise SlurmLabUnavailable(f"{' '.join(argv)} failed: {tail[0]}")
    still = missing_packages()
    if still:
        raise SlurmLabUnavailable(f"apt-get install did not provide {' '.join(still)}")
