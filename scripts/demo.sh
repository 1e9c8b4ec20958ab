#!/usr/bin/env bash
# Set up (idempotent) and run the main job: trainmedic's end-to-end demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec .venv/bin/trainmedic demo "$@"
