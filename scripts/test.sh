#!/usr/bin/env bash
# Sets up the demo set plus the test oracles (setup.sh test), then runs the whole test suite and
# the linter. --quick: only the ROS-free tier (no DDS, no node processes), for an edit-test loop.
# Other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
export OPENBLAS_NUM_THREADS=1
.venv/bin/ruff check .
if [ "${1:-}" = "--quick" ]; then
  shift
  echo "[test] --quick: the ROS-free tier only (test/ros and the tests marked 'ros' are left out)"
  exec .venv/bin/python -m pytest -q test --ignore=test/ros -m "not ros" "$@"
fi
.venv/bin/python -m pytest -q test "$@"
