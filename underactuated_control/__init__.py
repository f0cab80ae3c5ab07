"""underactuated_control: dynamics and control of robot arms with passive (unactuated) joints.

The math core (everything but ``nodes/``) imports no ROS module.
"""

from .model import RobotModel

__all__ = ["RobotModel"]
__version__ = "0.1.0"
