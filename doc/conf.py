"""Sphinx configuration (rosdoc2 builds a package's doc/ with Sphinx; pages are Markdown, read
by myst_parser). Build: .venv/bin/sphinx-build -W --keep-going -b html doc build/doc"""

project = "underactuated_control"
author = "underactuated_control maintainers"
copyright = "underactuated_control maintainers, BSD-3-Clause"

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
# the generated parameter tables are included by their node's page, not pages of their own
exclude_patterns = ["_build", "nodes/*_parameters.md"]

# headings up to ### get GitHub-style anchors, so [text](page.md#heading) is checked by Sphinx
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath"]
suppress_warnings: list[str] = []

html_theme = "alabaster"
html_static_path: list[str] = []
