#!/usr/bin/env bash
# Sets everything up, then runs the whole test suite and the linter.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OPENBLAS_NUM_THREADS=1
.venv/bin/ruff check .
.venv/bin/python -m pytest -q test "$@"
