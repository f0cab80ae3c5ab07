"""Parameter tables (parameters.py): coercion of what users type, one-line errors naming the
parameter, the one "one value or one per joint" rule, typo detection."""

import numpy as np
import pytest

from underactuated_control.parameters import (
    ParameterError,
    ParameterSpec,
    check_known,
    coerce,
    per_joint,
    table,
)

GAIN = ParameterSpec("kp", [100.0], "stiffness", unit="1/s^2", low=0.0, high=1e6)
SCALAR = ParameterSpec("task_kp_position", 100.0, "stiffness", unit="1/s^2", low=0.0, high=1e6)
TIMEOUT = ParameterSpec("state_timeout", 0.1, "timeout", unit="s", low=1e-3, high=60.0)
MODE = ParameterSpec("mode", "hold", "law", choices=("joint", "hold", "task"))
COUNT = ParameterSpec("publish_every", 1, "steps", low=1, high=1000)
NAMES = ParameterSpec("passive_joints", [""], "joints")


def test_what_users_type_is_accepted():
    assert coerce(GAIN, 400.0) == [400.0]  # -p kp:=400.0: one value for every joint
    assert coerce(GAIN, 400) == [400.0]
    assert coerce(GAIN, [1, 2.5]) == [1.0, 2.5]
    assert coerce(SCALAR, 100) == 100.0 and isinstance(coerce(SCALAR, 100), float)
    assert coerce(NAMES, [""]) == [] and coerce(NAMES, "joint2") == ["joint2"]
    assert coerce(COUNT, 5) == 5


@pytest.mark.parametrize("spec, value, words", [
    (TIMEOUT, 0.0, "parameter state_timeout: must be >= 0.001 s, got 0"),
    (GAIN, [1.0, -2.0], "parameter kp: must be >= 0"),
    (GAIN, [float("nan")], "parameter kp: must be finite"),
    (MODE, "joints", "parameter mode: must be one of ['joint', 'hold', 'task'], got 'joints'"),
    (COUNT, 0, "parameter publish_every: must be >= 1"),
    (COUNT, 2.5, "parameter publish_every: expected an integer"),
    (SCALAR, "fast", "parameter task_kp_position: expected a number"),
    (SCALAR, True, "parameter task_kp_position: expected a number"),
    (NAMES, [1.0], "parameter passive_joints: expected a list of strings"),
])
def test_bad_values_name_the_parameter(spec, value, words):
    with pytest.raises(ParameterError) as info:
        coerce(spec, value)
    assert str(info.value).startswith(words) and "\n" not in str(info.value)


def test_validator_gets_the_context_and_its_error_names_the_parameter():
    def check(names, joints):
        unknown = [n for n in names if n not in joints]
        if unknown:
            raise ValueError(f"unknown joints {unknown}")

    spec = ParameterSpec("passive_joints", [""], "joints", validator=check)
    assert coerce(spec, ["b"], ("a", "b")) == ["b"]
    with pytest.raises(ParameterError, match=r"^parameter passive_joints: unknown joints \['c'\]"):
        coerce(spec, ["c"], ("a", "b"))


def test_one_value_or_one_per_joint():
    np.testing.assert_array_equal(per_joint("kp", [3.0], ["a", "b", "c"]), [3.0] * 3)
    np.testing.assert_array_equal(per_joint("kp", 3.0, ["a", "b"]), [3.0, 3.0])
    np.testing.assert_array_equal(per_joint("kp", [1, 2], ["a", "b"]), [1.0, 2.0])
    with pytest.raises(ParameterError, match=r"kp must be a scalar or have 3 entries"):
        per_joint("kp", [1.0, 2.0], ["a", "b", "c"])


def test_unknown_names_are_reported_with_a_suggestion():
    specs = table(GAIN, SCALAR, TIMEOUT)
    check_known(["kp", "use_sim_time", "qos_overrides./x.publisher.depth"], specs,
                also_known=["use_sim_time"])
    with pytest.raises(ParameterError, match=r"'kpp' \(did you mean 'kp'\?\)"):
        check_known(["kpp"], specs)


def test_every_tunable_scalar_has_a_range_and_a_description():
    """rqt_reconfigure shows a slider for bounded scalars and the description with its unit."""
    from underactuated_control.control.registry import law_parameters

    for spec in law_parameters():
        assert spec.description and not spec.read_only
        if spec.kind in ("double", "integer", "double[]"):
            assert spec.low is not None and spec.high is not None, spec.name
            # dimensionless: weights, gains on a force error, flags, normalised gains whose
            # description names their scale ("in units of ω0")
            words = ("units of", "ratio", "multiple", "share")
            assert (spec.unit or any(w in spec.description for w in words)
                    or "sign" in spec.name
                    or spec.name in ("passive_weight", "force_kp", "force_axes")), spec.name
