#!/usr/bin/env bash
# The whole test suite, set-up included: lint, types, unit and real-component tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
.venv/bin/ruff check src tests benchmarks
.venv/bin/ruff format --check src tests benchmarks
.venv/bin/mypy
.venv/bin/lint-imports
exec .venv/bin/pytest "$@"
