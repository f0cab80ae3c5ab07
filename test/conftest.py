"""Shared test set-up. Pinocchio/example-robot-data are test dependencies (see README set-up).

Test helpers are plain modules found through ``pythonpath`` in setup.cfg's [tool:pytest] (no
sys.path patches): ``helpers`` (repository paths, the scaled-tolerance assertion, random
passive sets), ``oracle`` (Pinocchio references and the maps between its vectors and ours) and,
for the DDS tests, ``harness``. They are modules rather than fixtures because the test files
use them at module level (URDF texts, parametrize lists).
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
