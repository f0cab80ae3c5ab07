"""A node's parameter table on rclpy: declarations with descriptors, start-up checks, and the
pre/on/post set-parameters protocol for run-time updates (rqt_reconfigure, ``ros2 param set``).

- Start-up: every ``-p name:=value`` override is checked against the table (an unknown name, a
  typo, is reported by name: rclpy would silently ignore it), coerced (``kp:=400.0`` is one
  value for every joint, ``task_kp_position:=100`` is 100.0) and validated; the first error is
  a ``ParameterError`` naming the parameter, which ``run_node`` prints as one line (exit 2).
- Run time: the pre-set callback coerces the same way; the on-set callback validates the whole
  update and lets the node build what depends on it *aside* (``build``); the post-set callback
  commits that (``commit``). A rejected update changes nothing and returns the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    ParameterType,
    SetParametersResult,
)
from rclpy.node import Node
from rclpy.parameter import Parameter

from ..parameters import (
    BOOL,
    DOUBLE,
    DOUBLE_ARRAY,
    INTEGER,
    STRING,
    STRING_ARRAY,
    ParameterSpec,
    check_known,
    coerce,
)

__all__ = ["NodeParameters", "descriptor"]

_ROS_TYPE = {
    BOOL: ParameterType.PARAMETER_BOOL, INTEGER: ParameterType.PARAMETER_INTEGER,
    DOUBLE: ParameterType.PARAMETER_DOUBLE, STRING: ParameterType.PARAMETER_STRING,
    DOUBLE_ARRAY: ParameterType.PARAMETER_DOUBLE_ARRAY,
    STRING_ARRAY: ParameterType.PARAMETER_STRING_ARRAY,
}


def descriptor(spec: ParameterSpec) -> ParameterDescriptor:
    """The descriptor rqt_reconfigure reads: description with unit, slider range for scalars."""
    desc = ParameterDescriptor(description=spec.full_description, read_only=spec.read_only,
                               type=_ROS_TYPE[spec.kind])
    if spec.choices:
        desc.additional_constraints = "one of: " + ", ".join(spec.choices)
    if spec.low is not None and spec.high is not None:
        if spec.kind == DOUBLE:
            desc.floating_point_range = [FloatingPointRange(
                from_value=float(spec.low), to_value=float(spec.high), step=0.0)]
        elif spec.kind == INTEGER:
            desc.integer_range = [IntegerRange(from_value=int(spec.low), to_value=int(spec.high),
                                               step=1)]
        else:
            desc.additional_constraints = f"each entry in [{spec.low:g}, {spec.high:g}]"
    return desc


def _ros_value(spec: ParameterSpec, value: Any) -> Any:
    if spec.kind == STRING_ARRAY and not value:
        return [""]  # an empty list has no type on the wire
    return list(value) if isinstance(value, (list, tuple)) else value


class NodeParameters:
    """A node's parameters from its table; the validated values are in ``values``.

    Unknown overrides are reported at construction; ``declare`` declares (a part of) the
    table, so that parameters naming joints can be validated against the model loaded from
    the robot parameters (the validators' ``context``). Call ``on_update`` once the node can
    build from new values.
    """

    def __init__(self, node: Node, table: Mapping[str, ParameterSpec]) -> None:
        self.node, self.table, self.context = node, table, None
        # rclpy has no public accessor for the command-line overrides
        self._overrides = dict(node._parameter_overrides)
        check_known(self._overrides, table, also_known=node._parameters)
        self.values: dict[str, Any] = {}
        self._pending: tuple[dict[str, Any], Any, set[str]] | None = None
        self._build: Callable[[dict[str, Any], set[str]], Any] | None = None
        self._commit: Callable[[Any, dict[str, Any], set[str]], None] | None = None

    def declare(self, names: list[str] | None = None, context: Any = None) -> dict[str, Any]:
        """Declare ``names`` (default: all not yet declared), validating each value with
        ``context`` (kept for run-time updates); returns the values."""
        if context is not None:
            self.context = context
        for name, spec in self.table.items():
            if (names is not None and name not in names) or name in self.values:
                continue
            raw = self._overrides[name].value if name in self._overrides else spec.default
            value = coerce(spec, raw, self.context)
            self.node.declare_parameter(name, _ros_value(spec, value), descriptor(spec),
                                        ignore_override=True)
            self.values[name] = value
        return self.values

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def on_update(self, build: Callable[[dict[str, Any], set[str]], Any],
                  commit: Callable[[Any, dict[str, Any], set[str]], None]) -> None:
        """``build(values, changed)`` makes what the node needs from the new values, without
        touching the node, or raises ``ValueError`` with the reason; ``commit(built, values,
        changed)`` installs it."""
        self._build, self._commit = build, commit
        self.node.add_pre_set_parameters_callback(self._pre_set)
        self.node.add_on_set_parameters_callback(self._on_set)
        self.node.add_post_set_parameters_callback(self._post_set)

    # -- the rclpy protocol ------------------------------------------------------------------
    def _pre_set(self, params: list[Parameter]) -> list[Parameter]:
        """Coerce what users type: an integer for a float, one number for a list."""
        out = []
        for p in params:
            spec = self.table.get(p.name)
            if spec is not None and spec.kind in (DOUBLE, DOUBLE_ARRAY):
                try:
                    value = coerce(spec, p.value)
                except ValueError:
                    value = None  # the on-set callback gives the reason
                if value is not None:
                    p = Parameter(p.name, value=_ros_value(spec, value))
            out.append(p)
        return out

    def _on_set(self, params: list[Parameter]) -> SetParametersResult:
        try:
            new = dict(self.values)
            changed = set()
            for p in params:
                spec = self.table.get(p.name)
                if spec is None:
                    continue  # e.g. use_sim_time: not ours
                new[p.name] = coerce(spec, p.value, self.context)
                changed.add(p.name)
            built = self._build(new, changed) if self._build and changed else None
        except ValueError as exc:
            self._pending = None
            return SetParametersResult(successful=False, reason=str(exc))
        self._pending = (new, built, changed)
        return SetParametersResult(successful=True)

    def _post_set(self, params: list[Parameter]) -> None:
        if self._pending is None:
            return
        new, built, changed = self._pending
        self._pending = None
        self.values = new
        if self._commit and changed:
            self._commit(built, new, changed)

