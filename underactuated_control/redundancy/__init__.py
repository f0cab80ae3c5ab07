"""Seraji configuration control for 7-DOF arms: arm angle, kinematic functions, weighted damped
least squares on the augmented Jacobian (doc/architecture.md §5)."""
