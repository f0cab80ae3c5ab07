#!/usr/bin/env bash
# Sets up what the demo needs (setup.sh demo: no test oracles), then runs the main demo: the
# closed loop over DDS (MuJoCo arm, controller, elbow resolver; an actuator fails half-way) and
# the model report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh demo
unset _ROS_WHEELS_BOOTSTRAP_COMPLETE
.venv/bin/underactuated-control inspect arm7 --passive joint2 joint4 --q 0 -0.3 0 -2.2 0 2 0.8
.venv/bin/underactuated-control demo --out demo_output
