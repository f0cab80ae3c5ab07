"""Shared fixtures. Pinocchio/example-robot-data are test dependencies (see README set-up)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
