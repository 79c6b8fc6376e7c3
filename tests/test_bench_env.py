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
