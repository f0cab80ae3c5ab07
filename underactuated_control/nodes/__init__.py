"""Thin rclpy adapters: messages <-> arrays, parameters, timers. The math is in the library."""
