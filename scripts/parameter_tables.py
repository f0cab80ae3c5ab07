"""Writes each node's parameter table (from the node's own table) into README.md between
``<!-- parameters: NODE -->`` and ``<!-- end parameters -->``, and the list of parameters
tunable at run time (rqt_reconfigure, ``ros2 param set``) between ``<!-- tunable parameters
-->`` and ``<!-- end tunable parameters -->``; ``--check`` only compares.
Run: .venv/bin/python scripts/parameter_tables.py [--check]"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from underactuated_control.nodes import (
    elbow_redundancy_resolver,
    hybrid_dynamics_controller,
    mujoco_sim,
)
from underactuated_control.parameters import markdown_table

README = Path(__file__).resolve().parents[1] / "README.md"
NODES = {
    "hybrid_dynamics_controller": hybrid_dynamics_controller.PARAMETERS,
    "elbow_redundancy_resolver": elbow_redundancy_resolver.PARAMETERS,
    "mujoco_sim": mujoco_sim.PARAMETERS,
}


def block(node: str) -> re.Pattern:
    return re.compile(rf"(<!-- parameters: {node} -->\n)(.*?)(<!-- end parameters -->)", re.S)


TUNABLE = re.compile(r"(<!-- tunable parameters -->\n)(.*?)(<!-- end tunable parameters -->)",
                     re.S)


def tunable_list() -> str:
    """Per node: the parameters rqt_reconfigure can change at run time (the rest are
    read-only, set at start)."""
    lines = ["| node | tunable at run time | read-only (set at start) |", "| --- | --- | --- |"]
    for node, table in NODES.items():
        tunable = [f"`{s.name}`" for s in table.values() if not s.read_only]
        fixed = [f"`{s.name}`" for s in table.values() if s.read_only]
        lines.append(f"| {node} | {', '.join(tunable) or '—'} | {', '.join(fixed) or '—'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    text = README.read_text()
    stale = []
    match = TUNABLE.search(text)
    if match is not None and match.group(2) != tunable_list():
        stale.append("tunable parameters")
        text = text[:match.start(2)] + tunable_list() + text[match.end(2):]
    for node, table in NODES.items():
        match = block(node).search(text)
        if match is None:
            print(f"README.md has no '<!-- parameters: {node} -->' block", file=sys.stderr)
            return 1
        expected = markdown_table(table) + "\n"
        if match.group(2) != expected:
            stale.append(node)
            text = text[:match.start(2)] + expected + text[match.end(2):]
    if "--check" in argv:
        if stale:
            print(f"README parameter tables out of date: {stale}", file=sys.stderr)
        return 1 if stale else 0
    README.write_text(text)
    print(f"updated: {stale or 'nothing'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
