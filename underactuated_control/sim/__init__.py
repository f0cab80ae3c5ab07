"""MuJoCo simulation of a robot model, without ROS (MuJoCo is a simulation dependency: the
controller core never imports it; this package imports it when a model is built).

- ``mujoco_spec`` / ``build_plant`` (``model.py``): the one MuJoCo model builder, used by the
  ``mujoco_sim`` node, the scenarios' in-process loops, the benches and the tests.
- ``AppliedWrench`` (``model.py``): an external wrench given at a frame of the model (world
  axes, about the frame's origin), applied through MuJoCo's ``xfrc_applied``.
- ``closed_loop`` (``loop.py``): a control law against that plant in this process, with a
  stated latency model.
"""

from .loop import closed_loop
from .model import INTEGRATORS, AppliedWrench, Plant, build_plant, dynamics_only, mujoco_spec

__all__ = ["INTEGRATORS", "AppliedWrench", "Plant", "build_plant", "closed_loop", "dynamics_only",
           "mujoco_spec"]
