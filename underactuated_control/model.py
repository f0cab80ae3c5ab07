"""The immutable robot model: bodies, parents, hinges, inertias, limits and the passive set.

Bodies are numbered base-to-tip with ``parent[i] < i`` (doc/architecture.md §2); every body carries
the hinge that connects it to its parent (``parent == -1``: the fixed world / root link). The
paper numbers links tip-to-base, so its "for k = 1..n" sweeps are ``reversed(range(nb))`` here.

The arrays are frozen (read-only) so that one model can be shared by many workspaces and by the
models that ``with_passive`` derives from it (an actuator failure costs only new index sets).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .so3 import integrate_pose
from .spatial import spatial_inertia

# Hinge type codes used by the compiled kernels.
REVOLUTE = 0
PRISMATIC = 1
FLOATING = 2

__all__ = ["RobotModel", "Frame", "Payload", "REVOLUTE", "PRISMATIC", "FLOATING"]


@dataclass(frozen=True)
class Frame:
    """A link frame rigidly attached to a body: ``(E, r)`` maps body axes to link axes."""

    body: int  # -1: attached to the fixed root
    rotation: np.ndarray  # E (3x3): body coordinates -> link coordinates
    translation: np.ndarray  # r (3,): link origin in body coordinates


@dataclass(frozen=True, eq=False)
class Payload:
    """A rigid payload held by a link frame (``RobotModel.with_payload``): its mass [kg], centre
    of mass ``com`` [m] in the frame's axes and rotational inertia [kg m²] about the com in the
    frame's axes; ``body`` is the body it is merged into."""

    frame: str
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    body: int


def _payload_inputs(mass, com, inertia) -> tuple[float, np.ndarray, np.ndarray]:
    """Validated (mass, com, inertia); one-line ValueError naming the field at fault."""
    try:
        m = float(mass)
    except (TypeError, ValueError):
        raise ValueError(f"payload mass must be a number [kg], got {mass!r}") from None
    if not (np.isfinite(m) and m >= 0.0):
        raise ValueError(f"payload mass must be finite and >= 0 [kg], got {m}")
    c = np.array(com, dtype=float)
    if c.shape != (3,) or not np.isfinite(c).all():
        raise ValueError(f"payload com must be 3 finite numbers [m], got {c.tolist()}")
    inertia_arr = np.array(inertia, dtype=float)
    if inertia_arr.shape != (3, 3) or not np.isfinite(inertia_arr).all():
        raise ValueError("payload inertia must be a finite 3x3 matrix [kg m^2], got "
                         f"{inertia_arr.tolist()}")
    scale = max(np.abs(inertia_arr).max(), 1e-300)
    if np.abs(inertia_arr - inertia_arr.T).max() > 1e-9 * scale:
        raise ValueError(f"payload inertia must be symmetric, got {inertia_arr.tolist()}")
    inertia_arr = 0.5 * (inertia_arr + inertia_arr.T)
    moments = np.linalg.eigvalsh(inertia_arr)  # principal moments, ascending
    tol = 1e-12 * scale
    if moments[0] < -tol:
        raise ValueError("payload inertia must be positive semi-definite, principal moments "
                         f"{moments.tolist()}")
    if moments[0] + moments[1] < moments[2] - tol:
        raise ValueError("payload inertia violates the triangle inequality of principal "
                         f"moments (I1 + I2 >= I3), principal moments {moments.tolist()}")
    return m, c, inertia_arr


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class RobotModel:
    """Kinematic tree with spatial inertias and an active/passive split of its joints.

    Build it with :meth:`from_urdf`. ``joint_names`` lists the moving joints in DOF order
    (depth-first from the root, children in URDF document order); for a robot without
    floating joints it has one entry per velocity DOF. ``dof_names`` always has ``nv`` entries
    (a floating joint ``j`` contributes ``j/x, j/y, j/z, j/rx, j/ry, j/rz``).
    ``nq`` and ``nv`` (sizes of q and v) are set once at construction.
    """

    name: str
    root_link: str
    gravity: np.ndarray
    body_names: tuple[str, ...]
    joint_names: tuple[str, ...]
    joint_types: tuple[str, ...]
    parent: np.ndarray
    hinge_type: np.ndarray
    axis: np.ndarray
    tree_rotation: np.ndarray
    tree_translation: np.ndarray
    motion_subspace: np.ndarray  # H*(k): (nb, 6, 6), first nv_joint[k] columns used
    q_start: np.ndarray
    v_start: np.ndarray
    nq_joint: np.ndarray
    nv_joint: np.ndarray
    inertia: np.ndarray  # M(k): (nb, 6, 6) spatial inertia about the body origin
    dof_names: tuple[str, ...]
    position_lower: np.ndarray
    position_upper: np.ndarray
    velocity_limit: np.ndarray
    effort_limit: np.ndarray
    damping: np.ndarray
    friction: np.ndarray
    frames: Mapping[str, Frame]
    ros2_control: Mapping[str, Mapping[str, tuple[str, ...]]]
    inertia_scale: float
    passive_joint_mask: np.ndarray = field(repr=False)
    payload: Payload | None = None  # see with_payload
    unloaded: RobotModel | None = field(default=None, repr=False)  # the model without it

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_urdf(
        cls,
        urdf: str | Path,
        passive_joints: Iterable[str] = (),
        root_link: str | None = None,
        tip_link: str | None = None,
        gravity: Sequence[float] = (0.0, 0.0, -9.81),
        floating_base: bool = False,
        allow_massless_links: bool = False,
        mimic: str = "error",
    ) -> RobotModel:
        """Parse a URDF (file path or XML string) into a model: ``urdf.load_model``."""
        # The loader lives in urdf.py, which imports this module; importing it here, at call
        # time, keeps this module free of it (no import-time cycle, no URDF parser needed to
        # use a model) while the public constructor stays a visible, typed method.
        from .urdf import load_model

        return load_model(
            urdf,
            passive_joints=passive_joints,
            root_link=root_link,
            tip_link=tip_link,
            gravity=gravity,
            floating_base=floating_base,
            allow_massless_links=allow_massless_links,
            mimic=mimic,
        )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray) and value.flags.writeable:
                object.__setattr__(self, f.name, _frozen(value))
        # sizes, fixed with the model (read on every control cycle: plain attributes)
        object.__setattr__(self, "nq", int(self.nq_joint.sum()))
        object.__setattr__(self, "nv", int(self.nv_joint.sum()))
        mask = self.passive_joint_mask
        passive_dof = np.zeros(self.nv, dtype=bool)
        for k in range(self.nb):
            passive_dof[self.v_start[k] : self.v_start[k] + self.nv_joint[k]] = mask[k]
        object.__setattr__(self, "passive_dof_mask", _frozen(passive_dof))
        object.__setattr__(self, "active_dofs", _frozen(np.flatnonzero(~passive_dof)))
        object.__setattr__(self, "passive_dofs", _frozen(np.flatnonzero(passive_dof)))

    # ---------------------------------------------------------------- sizes and names
    @property
    def nb(self) -> int:
        """Number of moving bodies (= number of moving joints)."""
        return len(self.parent)

    @property
    def n_active(self) -> int:
        return len(self.active_dofs)

    @property
    def n_passive(self) -> int:
        return len(self.passive_dofs)

    @property
    def active_joints(self) -> tuple[str, ...]:
        """Names of the actuated joints, in DOF order."""
        return tuple(n for n, p in zip(self.joint_names, self.passive_joint_mask) if not p)

    @property
    def passive_joints(self) -> tuple[str, ...]:
        """Names of the unactuated joints, in DOF order."""
        return tuple(n for n, p in zip(self.joint_names, self.passive_joint_mask) if p)

    @property
    def dof_is_linear(self) -> np.ndarray:
        """True for translational DOF (prismatic joints, floating x/y/z): units m, N."""
        out = np.zeros(self.nv, dtype=bool)
        for k in range(self.nb):
            j = self.v_start[k]
            if self.hinge_type[k] == PRISMATIC:
                out[j] = True
            elif self.hinge_type[k] == FLOATING:
                out[j : j + 3] = True
        return out

    @property
    def speed_limit(self) -> np.ndarray:
        """``velocity_limit`` per DOF with ∞ where the URDF gives none (0, missing or not
        finite): the bound a speed check applies."""
        limits = np.asarray(self.velocity_limit, dtype=float)
        return np.where(np.isfinite(limits) & (limits > 0.0), limits, np.inf)

    @property
    def link_names(self) -> tuple[str, ...]:
        return tuple(self.frames)

    def joint_index(self, name: str) -> int:
        """Body/joint index of a moving joint; ``ValueError`` naming the joint if unknown."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise ValueError(
                f"unknown joint '{name}': the model's moving joints are {list(self.joint_names)}"
            ) from None

    def joint_dofs(self, name: str) -> np.ndarray:
        """Velocity-DOF indices of a joint."""
        k = self.joint_index(name)
        return np.arange(self.v_start[k], self.v_start[k] + self.nv_joint[k])

    def frame(self, link: str) -> Frame:
        try:
            return self.frames[link]
        except KeyError:
            raise ValueError(
                f"unknown frame/link '{link}': known links are {sorted(self.frames)}"
            ) from None

    # ---------------------------------------------------------------- run-time status
    def with_passive(self, names: Iterable[str]) -> RobotModel:
        """The same robot with exactly ``names`` passive (an actuator fails or recovers).

        Shares every array with ``self``: no URDF re-parse, only new index sets.
        """
        names = [names] if isinstance(names, str) else list(names)
        mask = np.zeros(self.nb, dtype=bool)
        for n in names:
            mask[self.joint_index(n)] = True
        return dataclasses.replace(self, passive_joint_mask=mask)

    def with_payload(self, frame: str, mass: float, com, inertia) -> RobotModel:
        """The same robot holding a rigid payload at ``frame`` (a link or a fixed frame):
        ``mass`` [kg], ``com`` [m] in the frame's axes, ``inertia`` (3x3) [kg m²] about the com
        in the frame's axes, merged into the spatial inertia M(k) of the body holding the frame
        (doc/theory/external_wrenches.md, (P.1)). Replaces any payload already held; shares
        every array but ``inertia`` with ``self``; ``without_payload()`` returns the model
        without it (the original inertias, bit for bit). One-line ValueError naming the field
        (``frame``, ``mass``, ``com``, ``inertia``) on bad input."""
        base = self.without_payload()
        f = base.frame(frame)
        if f.body < 0:
            raise ValueError(f"payload frame '{frame}' is fixed to the root link "
                             f"'{self.root_link}': no moving body holds it")
        m, c, inertia_f = _payload_inputs(mass, com, inertia)
        E, r = f.rotation, f.translation  # frame axes = E (body axes); origin r in body axes
        com_body = r + E.T @ c
        inertia_body = E.T @ inertia_f @ E
        new = np.array(base.inertia)
        new[f.body] += spatial_inertia(m, com_body, inertia_body)  # (P.1)
        payload = Payload(frame, m, _frozen(c), _frozen(inertia_f), int(f.body))
        return dataclasses.replace(base, inertia=new, payload=payload, unloaded=base)

    def without_payload(self) -> RobotModel:
        """The same robot (same passive set) without its payload: the original inertia arrays
        themselves. ``self`` if it holds none."""
        if self.unloaded is None:
            return self
        return dataclasses.replace(self, inertia=self.unloaded.inertia, payload=None,
                                   unloaded=None)

    # ---------------------------------------------------------------- configurations
    def neutral_configuration(self) -> np.ndarray:
        """Zero joint positions; identity orientation for floating joints."""
        q = np.zeros(self.nq)
        for k in range(self.nb):
            if self.hinge_type[k] == FLOATING:
                q[self.q_start[k] + 6] = 1.0
        return q

    def random_configuration(self, rng: np.random.Generator, scale: float = np.pi) -> np.ndarray:
        """A random configuration inside finite joint limits (uniform in ±scale otherwise)."""
        q = np.zeros(self.nq)
        for k in range(self.nb):
            i, j = self.q_start[k], self.v_start[k]
            if self.hinge_type[k] == FLOATING:
                q[i : i + 3] = rng.uniform(-1.0, 1.0, 3)
                quat = rng.normal(size=4)
                q[i + 3 : i + 7] = quat / np.linalg.norm(quat)
            else:
                lo, hi = self.position_lower[j], self.position_upper[j]
                lo = lo if np.isfinite(lo) else -scale
                hi = hi if np.isfinite(hi) else scale
                q[i] = rng.uniform(lo, hi)
        return q

    def integrate(self, q: np.ndarray, v: np.ndarray, dt: float) -> np.ndarray:
        """q (+) v dt on the configuration manifold: a floating joint moves along the SE(3)
        exponential of its body twist [linear; angular] dt (Pinocchio's convention)."""
        out = np.array(q, dtype=float)
        for k in range(self.nb):
            i, j = self.q_start[k], self.v_start[k]
            if self.hinge_type[k] == FLOATING:
                out[i : i + 7] = integrate_pose(out[i : i + 7], v[j : j + 6] * dt)
            else:
                out[i] += v[j] * dt
        return out

    def check_state(self, **vectors: np.ndarray) -> None:
        """Validate sizes and finiteness of named state vectors; ``ValueError`` names the entry."""
        expected = {
            "q": self.nq,
            "v": self.nv,
            "qdd": self.nv,
            "tau": self.nv,
            "qdd_active": self.n_active,
            "tau_passive": self.n_passive,
            "tau_active": self.n_active,
        }
        for name, vec in vectors.items():
            arr = np.asarray(vec, dtype=float)
            n = expected[name]
            if arr.shape != (n,):
                raise ValueError(f"{name} must have shape ({n},), got {arr.shape}")
            bad = np.flatnonzero(~np.isfinite(arr))
            if bad.size:
                labels = self._labels(name)
                raise ValueError(
                    f"{name} has non-finite entries: "
                    + ", ".join(f"{labels[b]}={arr[b]}" for b in bad[:6])
                )

    def _labels(self, name: str) -> list[str]:
        if name == "q":
            out: list[str] = []
            for k, jn in enumerate(self.joint_names):
                if self.hinge_type[k] == FLOATING:
                    out += [f"{jn}/{c}" for c in ("x", "y", "z", "qx", "qy", "qz", "qw")]
                else:
                    out.append(jn)
            return out
        if name in ("qdd_active", "tau_active"):
            return [self.dof_names[i] for i in self.active_dofs]
        if name == "tau_passive":
            return [self.dof_names[i] for i in self.passive_dofs]
        return list(self.dof_names)

    def describe(self) -> str:
        """Human-readable summary: joints, types, passive status, masses."""
        lines = [
            f"robot '{self.name}': {self.nb} moving bodies, nq={self.nq}, nv={self.nv}, "
            f"root '{self.root_link}', gravity {tuple(float(g) for g in self.gravity)}"
        ]
        lines.append(f"  {'joint':<28}{'type':<11}{'parent':<24}{'status':<9}{'mass [kg]':>10}")
        for k in range(self.nb):
            par = self.body_names[self.parent[k]] if self.parent[k] >= 0 else self.root_link
            status = "PASSIVE" if self.passive_joint_mask[k] else "active"
            lines.append(
                f"  {self.joint_names[k]:<28}{self.joint_types[k]:<11}{par:<24}"
                f"{status:<9}{self.inertia[k, 5, 5]:>10.4f}"
            )
        lines.append(f"  active ({self.n_active} DOF): {list(self.active_joints)}")
        lines.append(f"  passive ({self.n_passive} DOF): {list(self.passive_joints)}")
        return "\n".join(lines)

