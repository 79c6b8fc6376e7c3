"""``rayfl bench env``: the scenario rows of ``--mode emulate`` and bad input."""

from __future__ import annotations

import pytest

from rayfl.benchmarks import env_speed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--scenario", "d2d-small-mobile"], "needs --mode emulate"),
        (["--mode", "emulate", "--scenario", "nope"], "d2d-small-mobile"),
        (["--mode", "emulate", "--lanes", "0"], ">= 1"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(argv, message, capsys):
    with pytest.raises(SystemExit):
        env_speed.main(argv)
    assert message in capsys.readouterr().err


def test_a_scenario_without_a_vector_env_is_named(monkeypatch):
    from rayfl.registry import topology_of

    plugin = topology_of("d2d")
    monkeypatch.setattr(type(plugin), "envs", {}, raising=False)
    with pytest.raises(ValueError, match="has no vector env"):
        env_speed._scenario_envs(["d2d-small-mobile"])


@pytest.mark.usefixtures("ray_session")
def test_the_moving_d2d_scenario_is_timed_on_its_own_config(monkeypatch):
    """The row runs the scenario's world (moving nodes, devices), not the default."""
    seen = []
    timed = env_speed.timed_steps

    def spy(env, steps, *, vector):
        topo = env.config.topology
        seen.append((topo.mobility, topo.availability, topo.round_deadline_s))
        return timed(env, steps, vector=vector)

    monkeypatch.setattr(env_speed, "timed_steps", spy)
    rows = env_speed.scenario_rows(["d2d-small-mobile"], [2], 1, repeat=0)
    assert [(r["env"], r["lanes"], r["steps"]) for r in rows] == [
        ("d2d-small-mobile-vector", 2, 2)
    ]
    assert rows[0]["steps_per_s"] > 0
    assert seen == [("random_waypoint", "markov", 0.012)]


def test_each_vector_row_is_compared_with_the_surrogate_timed_beside_it(monkeypatch):
    """vs_surrogate of a vector row: over the mean of the surrogate's rates timed
    just before and just after it (scripted timings, no Ray)."""
    import argparse

    surrogate_rates = iter([1000.0, 800.0, 600.0])

    class Env:
        def __init__(self, kind, lanes=1):
            self.kind, self.num_envs = kind, lanes
            self.unwrapped = argparse.Namespace(config=None)

        def close(self):
            pass

    def fake_load(_):
        def make(mode="emulate", num_envs=None, **_kw):
            if num_envs is not None:
                return Env("vector", num_envs)
            return Env("surrogate" if mode == "surrogate" else "single")

        return make

    def fake_timed(env, steps, *, vector):
        if env.kind == "surrogate":
            return steps, steps / next(surrogate_rates)
        if env.kind == "single":
            return 50, 2.0
        return 100 * env.num_envs, 1.0

    monkeypatch.setattr(env_speed, "load", fake_load)
    monkeypatch.setattr(env_speed, "timed_steps", fake_timed)
    monkeypatch.setattr(env_speed, "trainer_bound", lambda config, lanes: 1.0)
    monkeypatch.setattr(env_speed, "_vector_envs", lambda: [("star", "vector")])
    args = argparse.Namespace(steps=5, vector_steps=3, lanes=[2, 4], scenario=[])
    rows = {(r["env"], r["lanes"]): r for r in env_speed._one_repeat(args, 0)}
    assert rows[("surrogate", 1)]["steps_per_s"] == 1000.0
    assert rows[("single", 1)]["vs_surrogate"] == 0.03  # 25 / 1000
    assert rows[("vector", 2)]["surrogate_steps_per_s"] == 900.0  # (1000 + 800) / 2
    assert rows[("vector", 2)]["vs_surrogate"] == round(200 / 900, 2)
    assert rows[("vector", 4)]["surrogate_steps_per_s"] == 700.0  # (800 + 600) / 2
    assert rows[("vector", 4)]["vs_surrogate"] == round(400 / 700, 2)
    assert rows[("vector", 4)]["ratio"] == 16.0  # 400 / 25
