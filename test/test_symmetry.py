"""M(q) and S_aa(q) come out of the recursion symmetric, without being symmetrised.

``mass_matrix`` and ``underactuated_mass_matrix`` return the matrices column by column as the
recursion computes them (column j is the force for a unit acceleration of DOF j); nothing
averages them with their transposes, so an asymmetry would show here. Measured on these robots:
at most 1e-15 of the largest entry for M and 2e-14 for S_aa (whose Schur complement loses a few
digits to cancellation); the bounds below leave ~100x (M) and ~50x (S_aa) of headroom.
"""

import numpy as np
import pytest
from helpers import ARM7_PATH, SPACE_ARM_PATH, random_passive_set
from oracle import EXAMPLE_URDFS, random_tree_urdf

from underactuated_control import RobotModel
from underactuated_control.dynamics import mass_matrix
from underactuated_control.jacobians import underactuated_mass_matrix

M_TOL = 1e-13
S_TOL = 1e-12


def asymmetry(A: np.ndarray) -> float:
    """max |A - A^T| relative to the largest entry of A."""
    return float(np.abs(A - A.T).max(initial=0.0) / max(np.abs(A).max(initial=0.0), 1e-300))


def robots():
    yield "arm7", RobotModel.from_urdf(ARM7_PATH)
    yield "space_arm", RobotModel.from_urdf(SPACE_ARM_PATH, floating_base=True, gravity=(0, 0, 0))
    for name in ("panda", "ur5", "kinova", "z1"):
        yield name, RobotModel.from_urdf(EXAMPLE_URDFS[name].read_text(), mimic="independent")
    yield "solo12_floating", RobotModel.from_urdf(EXAMPLE_URDFS["solo12"].read_text(),
                                                  floating_base=True)
    for seed in range(4):
        rng = np.random.default_rng(300 + seed)
        text = random_tree_urdf(rng, int(rng.integers(10, 50)), chain=seed % 2 == 0)
        yield f"random{seed}", RobotModel.from_urdf(text)


ROBOTS = dict(robots())


@pytest.mark.parametrize("name", list(ROBOTS))
def test_mass_matrix_is_symmetric_as_computed(name):
    model = ROBOTS[name]
    rng = np.random.default_rng(1)
    for _ in range(4):
        M = mass_matrix(model, model.random_configuration(rng))
        assert M.shape == (model.nv, model.nv)
        assert asymmetry(M) <= M_TOL, asymmetry(M)
        assert np.linalg.eigvalsh(M).min() > 0.0


@pytest.mark.parametrize("name", list(ROBOTS))
def test_underactuated_mass_matrix_is_symmetric_as_computed(name):
    model = ROBOTS[name]
    floating = model.hinge_type[0] == 2
    rng = np.random.default_rng(2)
    for _ in range(4):
        q = model.random_configuration(rng)
        passive = random_passive_set(model, rng, first=True if floating else None, last=False)
        m = model.with_passive(passive)
        S = underactuated_mass_matrix(m, q)
        assert S.shape == (m.n_active, m.n_active)
        assert asymmetry(S) <= S_TOL, (asymmetry(S), passive)
