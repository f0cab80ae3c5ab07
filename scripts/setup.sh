#!/usr/bin/env bash
# Creates .venv with the package and what a mode needs. Usage: bash scripts/setup.sh [demo|test]
#   demo  the package with the extras ros (ROS 2 wheels: rclpy, Fast DDS, messages), sim (MuJoCo)
#         and plots (matplotlib): what scripts/demo.sh runs
#   test  (default) demo's set plus the test oracles and tools (Pinocchio, example-robot-data,
#         pytest, ruff; ~430 MB): what scripts/test.sh runs
# Both then build the control_msgs Python bindings (scripts/build_control_msgs.sh; nothing to do
# where control_msgs imports, cached otherwise). Idempotent: re-installs only when setup.py
# changed or the mode asks for more than is installed (a demo set-up followed by a test set-up
# adds the oracles). Needs Python >= 3.10 with venv; the bindings need cmake (else pip's) and a
# C/C++ compiler.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mode=${1:-test}
case "$mode" in
  demo) extras="ros,sim,plots" ;;
  test) extras="ros,sim,plots,test" ;;
  *) echo "[setup] error: mode must be 'demo' or 'test', got '$mode'" >&2; exit 2 ;;
esac
unset _ROS_WHEELS_BOOTSTRAP_COMPLETE

# A stamp per mode, valid while newer than setup.py; the test set includes the demo set.
fresh() { [ -f "$1" ] && [ "$1" -nt setup.py ]; }
stamp_demo=.venv/.installed-demo
stamp_test=.venv/.installed-test
stamp_msgs=.venv/.installed-control_msgs
if fresh "$stamp_test" || { [ "$mode" = demo ] && fresh "$stamp_demo"; }; then
  packages_ok=1
else
  packages_ok=0
fi
# the bindings: valid while newer than every file they are built from
msgs_ok=0
if [ -f "$stamp_msgs" ] && [ -z "$(find interfaces scripts/build_control_msgs.sh -newer "$stamp_msgs" -print -quit)" ]; then
  msgs_ok=1
fi
# test mode: Debian's colcon, for the test that builds the package as a ROS 2 workspace does
if [ "$mode" = test ] && ! command -v colcon >/dev/null; then
  colcon_debs="colcon python3-colcon-ros python3-colcon-python-setup-py"
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "[setup] installing Debian's colcon ($colcon_debs)"
    apt-get install -y -q $colcon_debs >/dev/null 2>&1 || {
      apt-get update -q >/dev/null && apt-get install -y -q $colcon_debs >/dev/null; }
  else
    echo "[setup] error: the tests need colcon: sudo apt-get install $colcon_debs" \
         "(or a ROS 2 install's colcon)" >&2
    exit 1
  fi
fi
# numba's kernel cache: valid while the package's sources are those it was compiled from
stamp_warm=.venv/.warm-kernels
source_hash=$(find underactuated_control -name '*.py' -print0 | sort -z | xargs -0 cat | sha256sum)
warm_ok=0
if [ -f "$stamp_warm" ] && [ "$(cat "$stamp_warm")" = "$source_hash" ]; then
  warm_ok=1
fi
if [ "$packages_ok" = 1 ] && [ "$msgs_ok" = 1 ] && [ "$warm_ok" = 1 ]; then
  exit 0
fi

if [ "$packages_ok" = 0 ]; then
  if [ ! -x .venv/bin/python ]; then
    echo "[setup] creating .venv with $($PY --version 2>&1)"
    "$PY" -m venv .venv
    .venv/bin/python -m pip install --quiet --upgrade pip
  fi
  echo "[setup] installing underactuated_control[$extras] ($mode set; a few minutes the first time)"
  .venv/bin/python -m pip install --quiet --progress-bar off -e ".[$extras]"
  touch ".venv/.installed-$mode"
fi

if [ "$msgs_ok" = 0 ]; then
  if bash scripts/build_control_msgs.sh .venv; then
    touch "$stamp_msgs"
  elif [ "$mode" = test ]; then
    exit 1
  else
    echo "[setup] warning: no control_msgs bindings: the controller runs without its" \
         "follow_joint_trajectory action and controller_state topic" >&2
  fi
fi
if [ "$warm_ok" = 0 ]; then
  # every compiled kernel once, so that the first launch answers within a second
  echo "[setup] compiling the kernels once and solving the bundled swing-up plans (underactuated-control warm-up; several minutes the first time)"
  .venv/bin/underactuated-control warm-up --quiet
  echo "$source_hash" > "$stamp_warm"
fi
echo "[setup] done ($mode)"
