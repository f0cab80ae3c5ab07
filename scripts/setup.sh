#!/usr/bin/env bash
# Creates .venv with the package, the ROS 2 Python wheels (rclpy, Fast DDS, messages) and the
# test oracles (Pinocchio, MuJoCo, example-robot-data). Idempotent: re-runs only when setup.py
# changed. Needs Python >= 3.10 with venv (python3 -m venv) and a C compiler is NOT required.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
stamp=.venv/.installed
if [ -f "$stamp" ] && [ "$stamp" -nt setup.py ]; then
  exit 0
fi
echo "[setup] creating .venv with $($PY --version 2>&1)"
"$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
echo "[setup] installing underactuated_control[ros,sim,test] (ROS 2 wheels, Pinocchio, MuJoCo; a few minutes the first time)"
.venv/bin/python -m pip install --quiet --progress-bar off -e '.[ros,sim,test]'
touch "$stamp"
echo "[setup] done"
