"""underactuated_control: dynamics and control of robot arms with passive (unactuated) joints.

The math core (everything but ``nodes/``) imports no ROS module.
"""

from ._kernel_cache import install as _install_kernel_cache

_install_kernel_cache()  # before any kernel is defined

from .model import RobotModel  # noqa: E402

__all__ = ["RobotModel"]
__version__ = "0.1.0"
