#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine (root): system packages the real-component
# tests need (Slurm, munge), then a project venv with the package and its extras.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v slurmctld >/dev/null 2>&1 || need_apt+=(slurmctld)
command -v slurmd >/dev/null 2>&1 || need_apt+=(slurmd)
command -v sbatch >/dev/null 2>&1 || need_apt+=(slurm-client)
command -v munged >/dev/null 2>&1 || need_apt+=(munge)
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need_apt+=(openssh-client)
# A real PostgreSQL server for the store tests (initdb/pg_ctl live outside PATH on Debian).
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need_apt+=(postgresql)
# Headless Chromium for the web view's browser tests (driven by Playwright's Python package
# with executable_path=/usr/bin/chromium; `playwright install` is never run).
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "bootstrap: installing Debian packages: ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    echo "bootstrap: not root, cannot install ${need_apt[*]}; Slurm tests will say why they skip" >&2
  fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.trainmedic-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # torch is pinned to the CPU build in pyproject (extra "demo").
  # "frameworks": the real training frameworks the end-to-end tests run as workloads.
  .venv/bin/python -m pip install -q -e ".[demo,dev,postgres,frameworks]"
  touch "$stamp"
fi
