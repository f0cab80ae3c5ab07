"""Trajectory optimisation through the hybrid recursion (ROS-free).

``HybridStep``: the discrete dynamics x' = f(x, u) of a robot with passive joints, state
x = (q, v), control u = the active joints' torques (their effort limits are boxes), the passive
joints driven by their passive-force model. ``costs``: quadratic, frame and frame-path terms, or
your own.
``solve_box_ddp``: box-constrained DDP (control-limited iLQR) returning the trajectory and its
Riccati feedback gains. See doc/theory/trajectory_optimisation.md.
"""

from .costs import BoxCost, ControlCost, Cost, CostSum, FrameCost, FramePathCost, StateCost
from .ddp import Solution, solve_box_ddp
from .dynamics import FilteredTorques, HybridStep

__all__ = ["HybridStep", "FilteredTorques", "Cost", "BoxCost", "CostSum", "StateCost",
           "ControlCost", "FrameCost", "FramePathCost", "Solution", "solve_box_ddp"]
