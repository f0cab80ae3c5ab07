"""The documentation: doc/ builds with Sphinx with warnings as errors (a broken link or
cross-reference fails), the generated parameter tables are those the script generates from the
nodes' tables, the README's links and Python example work, and nothing cites or reads files
outside the repository."""

import re
import subprocess
import sys

from helpers import ROOT

# spelt in two pieces so that this file does not match its own check
OUTSIDE = [re.compile(p) for p in (r"\.\./" + "shared", "/work/" + "shared",
                                   "ARCHITECTURE" + r"(\.md)? §")]


def test_docs_build_without_warnings(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "sphinx", "-n", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), "doc", str(tmp_path / "html")],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"sphinx-build failed:\n{res.stderr}\n{res.stdout[-2000:]}"
    assert (tmp_path / "html" / "index.html").exists()


def test_generated_parameter_tables_are_up_to_date():
    res = subprocess.run([sys.executable, "scripts/parameter_tables.py", "--check"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr


def test_readme_is_short_and_its_links_exist():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    assert targets
    for target in targets:
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        assert path and (ROOT / path).exists(), f"README links to missing {target!r}"
        if anchor and path.endswith(".md"):
            slugs = {heading_slug(h) for h in re.findall(r"^#{1,3} (.+)$",
                                                         (ROOT / path).read_text(), re.M)}
            assert anchor in slugs, f"README links to missing heading {target!r}"


def heading_slug(title: str) -> str:
    """GitHub's (and myst_heading_anchors') anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def test_readme_python_example_runs(monkeypatch, capsys):
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "README has no Python example"
    monkeypatch.chdir(ROOT)
    exec(compile(blocks[0], "README.md example", "exec"), {"__name__": "readme_example"})
    out = capsys.readouterr().out
    assert "joint1" in out  # the active joints after joint5 fails


def test_nothing_cites_or_reads_files_outside_the_repository():
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split("\0")
    hits = []
    for name in files:
        path = ROOT / name
        if not name or not path.is_file() or path.suffix in {".png", ".mcap", ".db3", ".npz"}:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if any(p.search(line) for p in OUTSIDE):
                hits.append(f"{name}:{number}: {line.strip()}")
    assert not hits, "cite doc/architecture.md instead:\n" + "\n".join(hits)
