"""A Griffe extension: read a docstring's ``Example:`` section as ``Examples:``.

The project's docstrings use Google style with a singular ``Example:`` section
(STYLE.md rule 25). Griffe's Google parser reads only the plural as a section of
doctests (rendered as code); the singular becomes an admonition of Markdown, where
a doctest's output such as ``[[0, 1], [2, 3]]`` reads as a broken link. This
extension, loaded by mkdocstrings (``extensions:`` in ``mkdocs.yml``), renames the
heading before the docstring is parsed; the source files are untouched.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.M)


class ExampleSection(griffe.Extension):
    """Rename ``Example:`` section headings to ``Examples:`` in every docstring."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite the docstring of each object as it is loaded."""
        if obj.docstring is not None:
            obj.docstring.value = _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
