#!/usr/bin/env bash
# Sets everything up, then runs the main demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/underactuated-control inspect arm7 --passive joint2 joint4 --q 0 -0.3 0 -2.2 0 2 0.8
