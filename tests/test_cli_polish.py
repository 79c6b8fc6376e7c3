"""CLI polish (issue 35): help on every option, human units, docs lists match code."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from rayfl import cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
GETTING_STARTED = (ROOT / "docs" / "getting_started.md").read_text()

pytestmark = pytest.mark.quick


def _parsers(parser: argparse.ArgumentParser, path: str = "rayfl"):
    """Yield (command path, parser) for the parser and every subcommand's."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_option_and_argument_of_every_subcommand_has_help():
    # Arrange
    parser = cli.build_parser()
    silent = []
    commands = 0
    # Act
    for path, p in _parsers(parser):
        commands += 1
        for action in p._actions:
            if isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                silent += [
                    f"{path} {c.dest}" for c in action._choices_actions if not c.help
                ]
                continue
            if not (action.help or "").strip():
                silent.append(f"{path} {action.option_strings or action.dest}")
    # Assert
    assert commands >= 10  # it walked the subcommands
    assert not silent, f"options without help text: {silent}"


def _help_entries(text: str) -> dict[str, str]:
    """Each option of an argparse help screen → its help text ("" if none)."""
    entries: dict[str, str] = {}
    current = None
    for line in text.split("options:", 1)[1].splitlines():
        if not line.strip():
            if current is not None:
                break  # the epilog follows the options
            continue
        if line.startswith("  -"):  # "  --csv CSV   help..." (help after 2+ spaces)
            invocation, _, help_text = line.strip().partition("  ")
            current = invocation.split()[0].rstrip(",")
            entries[current] = help_text.strip()
        elif current is not None:  # a continuation or the help on its own line
            entries[current] = f"{entries[current]} {line.strip()}".strip()
    return entries


@pytest.mark.parametrize(
    "name",
    [
        "round-time",
        "flute",
        "scale",
        "env",
        "startup",
        "policies",
        "fit-surrogate",
        "train",
    ],
)
def test_every_bench_help_names_its_program_and_explains_every_option(name, capsys):
    # Arrange
    from rayfl.benchmarks import BENCHMARKS

    assert name in BENCHMARKS  # the list above is the registry's
    # Act: through the real console entry point; --help must not run the benchmark
    with pytest.raises(SystemExit) as stop:
        cli.main(["bench", name, "--help"])
    out = capsys.readouterr().out
    # Assert
    assert stop.value.code == 0
    assert out.startswith(f"usage: rayfl bench {name} "), out[:80]
    entries = _help_entries(out)
    assert "-h" in entries and len(entries) >= 2, out
    silent = [option for option, text in entries.items() if not text]
    assert not silent, f"rayfl bench {name}: options without help: {silent}"


def test_bench_registry_and_the_cli_choices_agree():
    from rayfl.benchmarks import BENCHMARKS

    bench = next(
        sub
        for action in cli.build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
        if name == "bench"
    )
    choices = next(a.choices for a in bench._actions if a.dest == "name")
    assert set(choices) == set(BENCHMARKS) | {"all"}


def test_version_prints_the_package_version(capsys):
    import rayfl

    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"rayfl {rayfl.__version__}"


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("memory", 3.54304e10, "33.0 GiB"),  # the value issue 35 saw
        ("object_store_memory", 150 * 2**20, "0.1 GiB"),
        ("CPU", 2.0, "2"),
        ("GPU", 0.5, "0.5"),
    ],
    ids=["memory", "object-store", "cpu", "fraction"],
)
def test_info_prints_memory_in_gib(key, value, shown):
    from rayfl.cli.info import human_resource

    assert human_resource(key, value) == shown


def _backticked(text: str) -> set[str]:
    return set(re.findall(r"`([a-z0-9_]+)`", text))


def test_readme_names_every_registered_policy_algorithm_and_dataset():
    from rayfl.algorithms.config import algorithm_names
    from rayfl.data.config import DataConfig
    from rayfl.registry import POLICIES

    datasets = DataConfig.model_fields["dataset"].annotation.__args__
    named = _backticked(README)
    missing = {
        "policies": sorted(set(POLICIES) - named),
        "algorithms": sorted(set(algorithm_names()) - named),
        "datasets": sorted(set(datasets) - named),
    }
    assert not any(missing.values()), f"README.md does not name: {missing}"


def _shown_error(doc: str) -> tuple[list[str], list[str]]:
    """The command and output lines of a doc's ``$ rayfl run ...`` block."""
    block = re.search(r"```\n\$ (rayfl run [^\n]+)\n(.*?)```", doc, re.S)
    assert block, "no '$ rayfl run' output block"
    return block.group(1).split()[1:], block.group(2).rstrip("\n").splitlines()


@pytest.mark.parametrize("doc", ["README.md", "getting_started.md"])
def test_shown_config_error_is_what_the_cli_prints(doc, capsys):
    # Arrange
    text = README if doc == "README.md" else GETTING_STARTED
    argv, shown = _shown_error(text)
    # Act
    code = cli.main(argv)
    printed = capsys.readouterr().err.rstrip("\n").splitlines()
    # Assert: the page shows the output or its first lines, word for word
    assert code == 2
    assert printed[: len(shown)] == shown


def test_plot_overlays_are_git_ignored():
    from rayfl.rundir.plots import overlay_dir

    ignored = (ROOT / ".gitignore").read_text().splitlines()
    name = overlay_dir(["runs/a-1", "runs/b-2", "runs/c-3"]).name
    assert any(
        line.endswith("/") and re.fullmatch(line[:-1].replace("*", ".*"), name)
        for line in ignored
    ), f"{name}/ is not matched by .gitignore"


def test_bench_startup_takes_its_own_flags_and_writes_the_csv(
    tmp_path, monkeypatch, capsys
):
    import pandas as pd

    import rayfl.benchmarks.startup as startup

    seen = []

    def fake_measure(repeats):
        seen.append(repeats)
        return [{"ratio": "help_vs_import_torch", "value": 0.1, "target": 0.25}]

    monkeypatch.setattr(startup, "measure", fake_measure)
    out = tmp_path / "startup.csv"
    assert cli.main(["bench", "startup", "--repeats", "5", "--out", str(out)]) == 0
    assert seen == [5]
    assert pd.read_csv(out)["ratio"].tolist() == ["help_vs_import_torch"]
