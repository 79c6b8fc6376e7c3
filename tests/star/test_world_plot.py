"""The moving world's plot (issue 48): client 0's channel and availability over rounds.

No Ray: the series the plot draws are checked against the scheduling env's
own observations of the same config and seed (surrogate mode runs the
engine's uplink model), so the plot shows the world the run met.
"""

from __future__ import annotations

import numpy as np
import pytest

from envs.star.scheduling import WirelessFLEnv
from rayfl.config import load_config
from rayfl.registry import topology_of
from rayfl.star.world_plot import client_world, moves, plot_client_world

EXAMPLE = "examples/mobile_star.yaml"


def test_the_plotted_series_are_the_worlds_the_env_observes():
    # Arrange: the example's world, observed round by round by the env
    cfg = load_config(EXAMPLE, ["rounds=12"])
    gains, available = client_world(cfg, 3)
    env = WirelessFLEnv(EXAMPLE, mode="surrogate", overrides=["rounds=12"])
    obs, _ = env.reset(seed=cfg.seed)
    seen_gain, seen_available = [], []
    for _ in range(cfg.rounds):
        seen_gain.append(np.asarray(obs["channel_gain"][3], np.float64))
        seen_available.append(bool(obs["available"][3]))
        obs, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            break
    env.close()
    rounds = len(seen_gain)
    # Assert: same availability; where reachable, the gain the env observes
    assert rounds >= 10
    assert available[:rounds].tolist() == seen_available
    assert (~available[:rounds]).any() and available[:rounds].any()
    here = available[:rounds]
    np.testing.assert_allclose(
        np.asarray(seen_gain)[here], gains[:rounds][here], rtol=1e-5, atol=1e-4
    )
    # correlated fading: consecutive rounds' gains are closer than far-apart ones
    step = np.abs(np.diff(gains, axis=0)).mean()
    far = np.abs(gains[6:] - gains[:-6]).mean()
    assert step < far


def test_the_star_draws_the_plot_only_when_the_world_moves(tmp_path):
    moving = load_config(EXAMPLE, ["rounds=5"])
    still = load_config(
        EXAMPLE,
        [
            "rounds=5",
            "wireless.fading_dynamics=iid",
            "wireless.availability=always",
            "wireless.speed_mps=null",
            "wireless.carrier_hz=null",
            "wireless.round_duration_s=null",
            "wireless.mean_on_rounds=null",
            "wireless.mean_off_rounds=null",
            "wireless.mobility=static",
            "wireless.mobility_speed_min_mps=null",
            "wireless.mobility_speed_max_mps=null",
            "wireless.shadowing_decorrelation_m=null",
            "wireless.fading_correlation=null",
        ],
    )
    assert moves(moving) and not moves(still)
    star = topology_of(moving)
    assert star.plots(still, tmp_path) == []
    (path,) = star.plots(moving, tmp_path)
    assert path.name == "world_client0.png" and path.stat().st_size > 5_000


def test_a_client_outside_the_run_is_refused(tmp_path):
    cfg = load_config(EXAMPLE, ["rounds=3"])
    with pytest.raises(ValueError, match=r"client must be in \[0, 20\), got 20"):
        plot_client_world(cfg, tmp_path / "x.png", client=20)
