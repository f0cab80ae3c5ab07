"""A solve off the control thread (ROS-free): one at a time, its result taken once it is done.

The box DDP's compiled loops (``kernels``: rollout, linearisation, backward pass, box QP,
frame path) release the GIL, so a solve in this thread leaves the control cycle running on the
other core; its Python glue (the line search, the costs' totals) still takes the GIL briefly.
``inline``: solved at the request, in the caller's thread (repeatable in-process runs).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

__all__ = ["BackgroundPlanner"]


class BackgroundPlanner:
    """One solve at a time computed off the control thread (``inline``: at the request)."""

    def __init__(self, solve: Callable, inline: bool, name: str = "planner") -> None:
        self._solve, self.inline, self._name = solve, inline, name
        self._thread: threading.Thread | None = None
        self._result: object | None = None

    @property
    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def request(self, *args) -> None:
        self._result = None
        if self.inline:
            self._run(*args)
            return
        self._thread = threading.Thread(target=self._run, args=args, daemon=True,
                                        name=self._name)
        self._thread.start()

    def _run(self, *args) -> None:
        try:
            self._result = self._solve(*args)
        except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:  # take() reports it
            self._result = exc

    def take(self) -> object | None:
        """The finished result (or the error), once; None while it is being computed."""
        if self.busy:
            return None
        result, self._result = self._result, None
        return result
