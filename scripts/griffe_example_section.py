"""A Griffe extension: adapt the project's docstrings to Griffe's Markdown rendering.

The project's docstrings use Google style with a singular ``Example:`` section
(STYLE.md rule 25) and, here and there, Sphinx roles such as ``:class:`RunLog```.
Griffe's Google parser reads only the plural ``Examples:`` as a section of doctests
(rendered as code); the singular becomes an admonition of Markdown, where a
doctest's output such as ``[[0, 1], [2, 3]]`` reads as a broken link. Sphinx roles
are not Markdown and would show as ``:class:RunLog``. This extension, loaded by
mkdocstrings (``extensions:`` in ``mkdocs.yml``), rewrites both in the loaded
docstring before it is parsed; the source files are untouched.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.M)
_ROLE = re.compile(
    r":(?:py:)?(?:class|func|meth|mod|attr|data|obj|exc|const):`~?([^`]+)`"
)


def adapt(docstring: str) -> str:
    """Return ``docstring`` with ``Example:`` as ``Examples:`` and roles as code.

    Example:
        >>> adapt("Load a run (:class:`~rayfl.rundir.results.RunLog`).")
        'Load a run (`rayfl.rundir.results.RunLog`).'
    """
    return _ROLE.sub(r"`\1`", _EXAMPLE.sub(r"\1Examples:", docstring))


class ExampleSection(griffe.Extension):
    """Adapt every docstring as it is loaded (see :func:`adapt`)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite the docstring of each object as it is loaded."""
        if obj.docstring is not None:
            obj.docstring.value = adapt(obj.docstring.value)
