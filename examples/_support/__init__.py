"""Modules shared by the example scripts (not scripts themselves).

Every ``examples/*.py`` is a runnable script with its own flags (the docs'
commands and ``tests/test_docs_snippets.py`` run each with ``--help``); the
pieces that make a long script longer than the size rule allows live here.
A script puts ``examples/`` on ``sys.path`` (also when a test loads it by
path) and imports them as ``_support.<module>``.
"""
