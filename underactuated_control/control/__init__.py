"""Control laws built on the hybrid dynamics and the under-actuated Jacobians."""

from .task_space import EndEffectorTracker, TaskReference, TrackingResult, rotation_error

__all__ = ["EndEffectorTracker", "TaskReference", "TrackingResult", "rotation_error"]
