#!/usr/bin/env bash
# Sets up the demo set plus the test oracles (setup.sh test), then runs the whole test suite and
# the linter.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
export OPENBLAS_NUM_THREADS=1
.venv/bin/ruff check .
.venv/bin/python -m pytest -q test "$@"
