"""What a new user sees: plot overlays, round numbering, progress bars, Ray's stderr."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

import rayfl.compare.variants  # noqa: F401  (bound before rayfl.runner.run is patched below)
from rayfl import cli
from rayfl.rundir.plots import ROUND_AXIS, overlay_dir, plot_rounds
from rayfl.rundir.results import RunResult

# All tests here use the shared Ray session (tests/conftest.py): the module then runs
# with the other Ray modules instead of starting Ray again at its first Ray test.
pytestmark = pytest.mark.usefixtures("ray_session")

TINY = {
    "name": "tiny",
    "rounds": 3,
    "eval_every": 2,
    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
    "model": {"kind": "mlr"},
    "scheduler": {"policy": "round_robin", "clients_per_round": 2},
    "output": {"progress": True, "plots": False},
}


def _rounds(acc: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "round": np.arange(len(acc)),
            "global_acc": acc,
            "eval_acc": acc,
            "eval_max_loss": [2.0] * len(acc),
        }
    )


def _fake_run(path: Path, acc: list[float]) -> Path:
    """A finished run directory (the files load_run reads), with its own plot."""
    path.mkdir(parents=True)
    _rounds(acc).to_parquet(path / "rounds.parquet")
    pd.DataFrame({"round": [0], "client": [0]}).to_parquet(path / "metrics.parquet")
    (path / "summary.json").write_text(json.dumps({"status": "finished"}))
    (path / "plots").mkdir()
    (path / "plots" / "eval_acc.png").write_bytes(b"the run's own plot")
    return path


def test_plot_of_several_runs_never_overwrites_a_runs_own_plots(
    tmp_path, monkeypatch, capsys
):
    a = _fake_run(tmp_path / "runs" / "a-1", [np.nan, 0.5, 0.7])
    b = _fake_run(tmp_path / "runs" / "b-2", [np.nan, 0.4, 0.6])
    monkeypatch.chdir(tmp_path)
    assert cli.main(["plot", str(a), str(b)]) == 0
    assert (a / "plots" / "eval_acc.png").read_bytes() == b"the run's own plot"
    assert (b / "plots" / "eval_acc.png").read_bytes() == b"the run's own plot"
    overlay = tmp_path / "plots-a-1-vs-b-2"
    assert overlay == overlay_dir([a, b], tmp_path)
    assert (overlay / "eval_acc.png").read_bytes()[:4] == b"\x89PNG"
    assert (
        str(overlay.relative_to(tmp_path) / "eval_acc.png") in capsys.readouterr().out
    )
    # --out chooses the folder; a run's own plots/ is refused for an overlay
    assert cli.main(["plot", str(a), str(b), "--out", "elsewhere"]) == 0
    assert (tmp_path / "elsewhere" / "eval_acc.png").is_file()
    assert cli.main(["plot", str(a), str(b), "--out", str(a / "plots")]) == 2
    assert "own plot folder" in capsys.readouterr().err
    assert (a / "plots" / "eval_acc.png").read_bytes() == b"the run's own plot"
    # one run: its own plots/ are redrawn, as before
    assert cli.main(["plot", str(a)]) == 0
    assert (a / "plots" / "eval_acc.png").read_bytes()[:4] == b"\x89PNG"


def test_overlay_dir_name_stays_short():
    many = [f"runs/quickstart-20260101-0000{i:02d}" for i in range(12)]
    name = overlay_dir(many).name
    assert name == "plots-quickstart-20260101-000000-vs-11-more"
    # two runs: the README's plots-<run>-vs-<run>
    assert overlay_dir(many[:2]).name == (
        "plots-quickstart-20260101-000000-vs-quickstart-20260101-000001"
    )


def test_plots_and_table_count_rounds_from_zero_like_rounds_parquet(
    tmp_path, monkeypatch, capsys
):
    figures = []
    monkeypatch.setattr("rayfl.rundir.plots.plt.close", figures.append)
    df = _rounds([np.nan, 0.5, np.nan, 0.8])
    plot_rounds({"r": df}, tmp_path)
    monkeypatch.undo()  # plt.close is matplotlib's own again
    ax = figures[0].axes[0]
    assert ax.get_xlabel() == ROUND_AXIS and "from 0" in ROUND_AXIS
    np.testing.assert_array_equal(ax.lines[0].get_xdata(), [1, 3])
    for fig in figures:
        plt.close(fig)
    # the console table prints rounds.parquet's round numbers and says so
    result = RunResult(
        tmp_path,
        pd.DataFrame(),
        df,
        {"status": "completed", "final": {}, "total_s": 1.0},
    )
    monkeypatch.setattr("rayfl.runner.run", lambda config: result)
    assert cli.main(["run", "examples/quickstart.yaml"]) == 0
    out = capsys.readouterr().out
    assert "counted from 0, as in rounds.parquet" in out
    lines = out.splitlines()
    assert lines[1].split()[0] == "round"
    assert [lines[2].split()[0], lines[3].split()[0]] == ["1", "3"]


class _Bar:
    """Records what the runner shows on its progress bar."""

    def __init__(self, desc: str | None) -> None:
        self.desc = desc
        self.steps: list[dict | None] = []
        self.postfix: dict | None = None

    def set_postfix(self, post, refresh=True):
        self.postfix = dict(post)

    def update(self, n=1):
        self.steps.append(None if self.postfix is None else dict(self.postfix))

    def close(self):
        pass


@pytest.fixture
def bars(monkeypatch):
    made: list[_Bar] = []

    def progress(enabled, total, desc=None):
        made.append(_Bar(desc))
        return made[-1]

    monkeypatch.setattr("rayfl.runner._progress", progress)
    return made


def test_progress_bar_shows_last_evaluation_and_no_ray_warning(
    ray_session, tmp_path, bars, capfd
):
    import ray

    import rayfl

    rayfl.run(TINY, {"output.dir": str(tmp_path)})
    (bar,) = bars
    assert bar.desc == "tiny"
    # round 0 not evaluated: nothing shown; then each evaluation with its round
    assert bar.steps[0] is None
    assert [s["eval_round"] for s in bar.steps[1:]] == [1, 2]
    assert all("nan" not in str(s) for s in bar.steps)
    # Ray's "constructor arguments in the object store and max_restarts > 0" line:
    # gone from runs; the same check sees it for an actor built the old way.
    err = capfd.readouterr().err
    assert "constructor arguments in the object store" not in err

    @ray.remote
    class Old:
        def __init__(self, data):
            self.data = data

        def ping(self):
            return 1

    old = Old.options(max_restarts=1).remote(ray.put(np.zeros(10)))
    ray.get(old.ping.remote())
    ray.kill(old)
    assert "constructor arguments in the object store" in capfd.readouterr().err


@pytest.mark.slow
def test_compare_bars_name_the_policy_and_the_algorithm(ray_session, tmp_path, bars):
    from rayfl.compare.variants import compare, compare_algorithms

    base = {**TINY, "rounds": 1, "eval_every": 1, "output": {"dir": str(tmp_path)}}
    compare(base, ["random", "round_robin"])
    compare_algorithms(base, ["fedavg", "fedprox"])
    assert [b.desc for b in bars] == [
        "tiny-random",
        "tiny-round_robin",
        "tiny-fedavg",
        "tiny-fedprox",
    ]


@pytest.mark.parametrize(
    ("final", "line"),
    [
        (
            {"global_acc": 0.9, "max_loss": 0.25},
            "final global accuracy 0.9000, max client loss 0.2500, 1.0 s (completed)",
        ),
        # D2D: the target's accuracy, no made-up max loss
        (
            {"target_acc": 0.848, "global_acc": 0.848},
            "final target accuracy 0.8480, 1.0 s (completed)",
        ),
        ({}, "1.0 s (completed)"),
    ],
    ids=["star", "d2d", "no-evaluation"],
)
def test_the_last_line_names_only_scores_the_run_has(monkeypatch, capsys, final, line):
    result = RunResult(
        Path("run"),
        pd.DataFrame(),
        pd.DataFrame({"round": [0], "global_acc": [0.5]}),
        {"status": "completed", "final": final, "total_s": 1.0},
    )
    monkeypatch.setattr("rayfl.runner.run", lambda config: result)
    assert cli.main(["run", "examples/quickstart.yaml"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == line
    assert "nan" not in out
