"""Parameter tables: each node's parameters declared once (ROS-free).

A ``ParameterSpec`` holds everything a parameter needs — name, default (which fixes its type),
description, unit, range, choices, read-only flag and an extra validator — so that one table
gives the node's declarations, the descriptors rqt_reconfigure shows, start-up and run-time
validation with the same one-line error, and the README's parameter list (checked by a test).

``coerce`` accepts what users type on a command line: an integer where a float is expected
(``task_kp_position:=100``) and one value where a list is expected (``kp:=400.0``: one value
for every joint). ``per_joint`` is the one place that expands "one value or one per joint".
"""

from __future__ import annotations

import array
import difflib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ParameterSpec", "ParameterError", "coerce", "per_joint", "check_known",
           "validate_all"]

DOUBLE, INTEGER, BOOL, STRING, DOUBLE_ARRAY, STRING_ARRAY = (
    "double", "integer", "bool", "string", "double[]", "string[]")


class ParameterError(ValueError):
    """A parameter value a node cannot use; the message names the parameter."""


@dataclass(frozen=True)
class ParameterSpec:
    """One parameter of a node.

    ``default`` fixes the type: float, int, bool, str, a list of floats or a list of strings.
    ``low``/``high`` bound a number or every entry of a list (inclusive); ``positive`` demands
    > 0. ``validator(value, context)`` adds checks that need the robot (``context`` is whatever
    the node passes, e.g. its model) and raises ``ValueError`` with the reason.
    """

    name: str
    default: Any
    description: str
    unit: str = ""
    low: float | None = None
    high: float | None = None
    read_only: bool = False
    choices: tuple[str, ...] = ()
    per_joint: bool = False
    validator: Callable[[Any, Any], None] | None = None

    @property
    def kind(self) -> str:
        d = self.default
        if isinstance(d, bool):
            return BOOL
        if isinstance(d, int):
            return INTEGER
        if isinstance(d, float):
            return DOUBLE
        if isinstance(d, str):
            return STRING
        if isinstance(d, (list, tuple)) and d and all(isinstance(x, str) for x in d):
            return STRING_ARRAY
        if isinstance(d, (list, tuple)) and all(isinstance(x, float) for x in d):
            return DOUBLE_ARRAY
        raise TypeError(f"parameter {self.name}: unsupported default {d!r}")

    @property
    def full_description(self) -> str:
        """The description with unit, range and choices, as rqt_reconfigure shows it."""
        text = self.description
        if self.unit:
            text += f" [{self.unit}]"
        if self.choices:
            text += f" (one of: {', '.join(self.choices)})"
        elif self.low is not None or self.high is not None:
            text += f" (range {_fmt(self.low)} .. {_fmt(self.high)})"
        if self.read_only:
            text += " (read-only: set at start)"
        return text


def _fmt(x: float | None) -> str:
    return "-inf" if x is None else f"{x:g}"


def _error(spec: ParameterSpec, reason: str) -> ParameterError:
    return ParameterError(f"parameter {spec.name}: {reason}")


def coerce(spec: ParameterSpec, value: Any, context: Any = None) -> Any:
    """The value in the spec's type, checked against range, choices and validator;
    ``ParameterError`` naming the parameter otherwise."""
    kind = spec.kind
    if isinstance(value, (np.ndarray, array.array)):  # rclpy gives arrays as array.array
        value = value.tolist()
    if kind == BOOL:
        if not isinstance(value, bool):
            raise _error(spec, f"expected true or false, got {value!r}")
    elif kind == INTEGER:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _error(spec, f"expected an integer, got {value!r}")
        _check_number(spec, value)
    elif kind == DOUBLE:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _error(spec, f"expected a number, got {value!r}")
        value = float(value)
        _check_number(spec, value)
    elif kind == STRING:
        if not isinstance(value, str):
            raise _error(spec, f"expected a string, got {value!r}")
        if spec.choices and value not in spec.choices:
            raise _error(spec, f"must be one of {list(spec.choices)}, got '{value}'")
    elif kind == DOUBLE_ARRAY:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = [value]  # one value where a list is expected: "all"
        if not isinstance(value, (list, tuple)) or any(
                isinstance(x, bool) or not isinstance(x, (int, float)) for x in value):
            raise _error(spec, f"expected a list of numbers, got {value!r}")
        value = [float(x) for x in value]
        for x in value:
            _check_number(spec, x)
    elif kind == STRING_ARRAY:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or any(not isinstance(x, str) for x in value):
            raise _error(spec, f"expected a list of strings, got {value!r}")
        value = [x for x in value if x]  # [""] is ROS's way to say "empty list"
    if spec.validator is not None:
        try:
            spec.validator(value, context)
        except ValueError as exc:
            text = str(exc)
            if text.startswith(spec.name + " "):  # "kp must be ...": already names it
                raise ParameterError(f"parameter {text}") from None
            raise _error(spec, text) from None
    return value


def _check_number(spec: ParameterSpec, x: float) -> None:
    if not math.isfinite(x):
        raise _error(spec, f"must be finite, got {x}")
    if spec.low is not None and x < spec.low:
        raise _error(spec, f"must be >= {spec.low:g}{' ' + spec.unit if spec.unit else ''}, "
                     f"got {x:g}")
    if spec.high is not None and x > spec.high:
        raise _error(spec, f"must be <= {spec.high:g}{' ' + spec.unit if spec.unit else ''}, "
                     f"got {x:g}")


def per_joint(name: str, values: Sequence[float] | float, joints: Sequence[str]
              ) -> np.ndarray:
    """One value (for every joint) or one per joint in ``joints`` order, as an array."""
    arr = np.atleast_1d(np.asarray(values, dtype=float))
    if arr.size == 1:
        return np.full(len(joints), float(arr[0]))
    if arr.shape != (len(joints),):
        raise ParameterError(f"{name} must be a scalar or have {len(joints)} entries, one per "
                             f"joint {list(joints)} (got {arr.size})")
    return arr.copy()


def check_known(names: Iterable[str], table: Mapping[str, ParameterSpec],
                also_known: Iterable[str] = ()) -> None:
    """``ParameterError`` naming every name the table does not have (a typo in ``-p``),
    with the closest known names as suggestions."""
    known = set(table) | set(also_known)
    unknown = sorted(n for n in names if n not in known and not n.startswith("qos_overrides."))
    if unknown:
        hints = []
        for n in unknown:
            close = difflib.get_close_matches(n, sorted(known), n=1)
            hints.append(f"'{n}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
        raise ParameterError(f"unknown parameter {', '.join(hints)}: this node has no such "
                             "parameter")


def validate_all(table: Mapping[str, ParameterSpec], values: Mapping[str, Any],
                 context: Any = None) -> dict[str, Any]:
    """Every value coerced and checked (first error raised), in table order."""
    return {name: coerce(spec, values[name], context) for name, spec in table.items()
            if name in values}


def table(*specs: ParameterSpec) -> dict[str, ParameterSpec]:
    """A name -> spec mapping in declaration order; duplicate names are a programming error."""
    out: dict[str, ParameterSpec] = {}
    for s in specs:
        if s.name in out:
            raise AssertionError(f"parameter {s.name} declared twice")  # pragma: no cover
        s.kind  # noqa: B018 - type check of the default
        out[s.name] = s
    return out


def markdown_table(specs: Mapping[str, ParameterSpec]) -> str:
    """The README's parameter table of a node (checked against the node's table by a test)."""
    lines = ["| parameter | type | default | unit | range | run time | description |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for s in specs.values():
        default = s.default
        if s.kind == STRING_ARRAY:
            default = [x for x in default if x]
        if s.choices:
            rng = " | ".join(s.choices)
        elif s.low is not None or s.high is not None:
            rng = f"{_fmt(s.low)} … {_fmt(s.high)}"
        else:
            rng = ""
        cells = [f"`{s.name}`", s.kind, f"`{default!r}`", s.unit, rng,
                 "no" if s.read_only else "yes", s.description]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)
