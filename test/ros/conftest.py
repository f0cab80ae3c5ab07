"""Fixtures for node tests over real DDS (see harness.py)."""

import os

import pytest
from harness import NodeProcess, Ros, new_domain


@pytest.fixture
def domain():
    return new_domain()


@pytest.fixture
def ros(domain):
    r = Ros(domain)
    yield r
    r.close()


@pytest.fixture
def launch(domain, tmp_path):
    os.environ["PYTEST_TMP"] = str(tmp_path)
    procs = []

    def start(executable, params=None, args=None):
        p = NodeProcess(executable, domain, params, args)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.stop()


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels():
    """Every kernel compiled (or loaded) once, in this process, before any node process starts
    (``underactuated-control warm-up``; scripts/setup.sh has normally done it already): the
    nodes then load numba's on-disk cache instead of each compiling on a fresh clone, which
    the tests' discovery timeouts would not absorb."""
    from underactuated_control.warmup import warm_up

    warm_up(report=None)
