"""D2D lanes (issue 47): a lane of ``D2DNeighborVectorEnv`` is ``D2DNeighbor-v0`` alone.

Also with nodes that move and every device model (issue 48, ``moving``:
correlated fading, availability, stragglers): round t's layout, P^err,
devices and link draws are keyed by (seed, purpose, round, node), so a lane
equals its episode alone.

Equality is to float32 rounding, not bit for bit (rtol 1e-5, atol 1e-6): the
lanes train with the stacked trainer and evaluate in batched passes
(:mod:`rayfl.d2d.lanes_host`, Implementation details 1); discrete outcomes
(neighbors, sub-channels, deliveries, ignored entries, terminations,
truncations, rounds) are exact.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from envs.d2d.neighbor import D2DNeighborEnv
from envs.d2d.vector import D2DNeighborVectorEnv
from rayfl.algorithms.pfedwn import em_step
from rayfl.d2d.lanes import check_d2d_lanes
from rayfl.d2d.lanes_host import em_steps_many
from rayfl.d2d.scenarios import scenarios

RTOL, ATOL = 1e-5, 1e-6
ROUNDS, STEPS, E = 3, 5, 3  # the step after round 3 resets every lane


def _small() -> dict[str, Any]:
    """d2d-small, shortened, with lossy links and π re-estimated every round."""
    config = dict(scenarios()["d2d-small"][1])
    config["rounds"] = ROUNDS
    config["topology"] = {
        **config["topology"],
        "link_model": "bernoulli",
        "em_mode": "online",
    }
    return config


#: Nodes that move (issue 48) with Bernoulli links of round t's P^err.
MOVING = [
    "topology.mobility=random_waypoint",
    "topology.round_duration_s=5",
    "topology.mobility_speed_min_mps=1",
    "topology.mobility_speed_max_mps=3",
    "topology.link_model=bernoulli",
    # and every device model (rayfl.d2d.devices): correlated fading, nodes
    # that come and go, log-normal CPUs under a round deadline
    "topology.fading_dynamics=gauss_markov",
    "topology.fading_correlation=0.8",
    "topology.availability=markov",
    "topology.mean_on_rounds=3",
    "topology.mean_off_rounds=2",
    "topology.cpu_frequency_distribution=lognormal",
    "topology.cpu_frequency_sigma=0.6",
    "topology.round_deadline_s=0.02",
]

CONFIGS = {
    "default": (None, [f"rounds={ROUNDS}"]),
    "moving": (None, [f"rounds={ROUNDS}", *MOVING]),
    "d2d-small": (_small(), []),
}


def _lane_info(infos: dict[str, Any], lane: int) -> dict[str, Any]:
    """Lane ``lane``'s info out of the vector env's batched infos."""
    out = {}
    for key, value in infos.items():
        if isinstance(key, str) and key.startswith("_"):
            continue
        if isinstance(value, dict):
            inner = _lane_info(value, lane)
            if inner or infos[f"_{key}"][lane]:
                out[key] = inner
        elif infos[f"_{key}"][lane]:
            out[key] = value[lane]
    return out


def _same(got: Any, want: Any, where: str) -> None:
    if isinstance(want, dict):
        assert sorted(map(str, got)) == sorted(map(str, want)), where
        for k, v in want.items():
            _same(got[k], v, f"{where}.{k}")
    elif isinstance(want, float | np.floating):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=where)
    else:
        assert [
            list(x) if isinstance(x, tuple) else x for x in np.ravel(got).tolist()
        ] == [
            list(x) if isinstance(x, tuple) else x for x in np.ravel(want).tolist()
        ] or got == want, where


@pytest.mark.parametrize(
    "name",
    # d2d-small (bernoulli links, online EM) is slow: the default suite keeps
    # the default config's oracle, `-m slow` runs both
    [
        n if n in ("default", "moving") else pytest.param(n, marks=pytest.mark.slow)
        for n in CONFIGS
    ],
)
def test_a_lane_equals_its_env_run_alone(ray_session, name):
    config, overrides = CONFIGS[name]
    venv = D2DNeighborVectorEnv(num_envs=E, config=config, overrides=overrides)
    try:
        obs, infos = venv.reset(seed=7)
        venv.action_space.seed(3)
        actions = [venv.action_space.sample() for _ in range(STEPS)]
        trail = [(obs, None, None, None, infos)]
        for action in actions:
            trail.append(venv.step(action))
        data = venv.lane_group().data
    finally:
        venv.close()
    assert trail[ROUNDS][3].all() and not trail[ROUNDS + 1][3].any()  # autoreset
    assert (trail[ROUNDS + 1][1] == 0).all()
    if name == "moving":  # the lanes' nodes do move between rounds 1 and 2
        assert (
            (trail[1][0]["distance_m"] != trail[2][0]["distance_m"]).any(axis=1).all()
        )
        assert any((step[0]["available"] == 0).any() for step in trail)  # some away
    # one actor for the lone env's engine (packing does not change the numbers)
    alone_overrides = [*overrides, f"ray.clients_per_actor={data.num_clients}"]
    env = D2DNeighborEnv(
        config=config, overrides=alone_overrides, mode="emulate", data=data
    )
    try:
        for lane in range(E):
            # lane 0 through its autoreset; the others' first episodes (each
            # reset of the lone env starts a new engine: kept few)
            steps = STEPS if lane == 0 else ROUNDS
            alone = [env.reset(seed=7 + lane)]
            for i, action in enumerate(actions[:steps]):
                if i == ROUNDS:  # the vector env's autoreset step
                    alone.append(env.reset())
                else:
                    alone.append(env.step(action[lane]))
            for i, (mine, theirs) in enumerate(zip(trail, alone, strict=False)):
                for key, value in theirs[0].items():
                    np.testing.assert_allclose(
                        mine[0][key][lane],
                        value,
                        rtol=RTOL,
                        atol=ATOL,
                        err_msg=f"lane {lane} step {i} obs {key}",
                    )
                info = _lane_info(mine[-1], lane)
                _same(info, theirs[-1], f"lane {lane} step {i} info")
                if len(theirs) == 5 and i != ROUNDS + 1:
                    np.testing.assert_allclose(
                        mine[1][lane], theirs[1], rtol=RTOL, atol=ATOL
                    )
                    assert (mine[2][lane], mine[3][lane]) == (theirs[2], theirs[3])
    finally:
        env.close()


def test_make_vec_gives_d2d_lanes_that_reset_and_step(ray_session):
    venv = gym.make_vec(
        "D2DNeighbor-v0", num_envs=4, vectorization_mode="vector_entry_point"
    )
    try:
        assert isinstance(venv.unwrapped, D2DNeighborVectorEnv)
        assert venv.unwrapped.mode == "emulate"
        obs, _ = venv.reset(seed=0)
        for _ in range(2):
            obs, rewards, terminated, truncated, infos = venv.step(
                venv.action_space.sample()
            )
            assert np.shape(rewards) == (4,) and np.isfinite(rewards).all()
            assert np.shape(terminated) == np.shape(truncated) == (4,)
        assert venv.observation_space.contains(obs)
        assert (obs["round"][:, 0] == 2).all()
    finally:
        venv.close()


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ("topology.method=local", "topology.method=pfedwn"),
        ("topology.target=all", "topology.target=all"),
    ],
)
def test_the_lanes_refuse_what_they_cannot_run_in_one_line(override, words):
    with pytest.raises(ValueError, match=words) as err:
        D2DNeighborVectorEnv(num_envs=2, overrides=[override])
    assert "\n" not in str(err.value)


def test_lossy_stale_links_and_other_models_are_refused():
    env = D2DNeighborEnv(
        overrides=["topology.on_loss=stale", "topology.link_model=bernoulli"]
    )
    with pytest.raises(ValueError, match="on_loss=renormalize"):
        check_d2d_lanes(env.config)
    cfg = D2DNeighborEnv().config
    cnn = cfg.model_copy(update={"model": cfg.model.model_copy(update={"kind": "cnn"})})
    with pytest.raises(ValueError, match="model.kind mlr or mlp"):
        check_d2d_lanes(cnn)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_num_envs_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="num_envs"):
        D2DNeighborVectorEnv(num_envs=bad)


def test_batched_em_steps_equal_em_step():
    rng = np.random.default_rng(0)
    log_pi = np.log(rng.dirichlet(np.ones(4), size=5))
    losses = rng.exponential(2.0, size=(5, 30, 4))
    got, loglik = em_steps_many(log_pi, losses, 3)
    for lane in range(5):
        want, ll = log_pi[lane], np.nan
        for _ in range(3):
            want, ll = em_step(want, losses[lane])
        np.testing.assert_allclose(got[lane], want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(loglik[lane], ll, rtol=1e-12)


def test_em_steps_of_padded_selections_equal_each_alone():
    """Mixtures of 1..9 models padded to 9 (log π = −∞, loss 0) run as alone."""
    rng = np.random.default_rng(1)
    widths = [1, 2, 5, 9, 3]
    log_pi = np.full((len(widths), 9), -np.inf)
    losses = np.zeros((len(widths), 20, 9))
    for j, k in enumerate(widths):
        log_pi[j, :k] = np.log(rng.dirichlet(np.ones(k)))
        losses[j, :, :k] = rng.exponential(2.0, size=(20, k))
    got, loglik = em_steps_many(log_pi, losses, 2)
    for j, k in enumerate(widths):
        want, ll = em_steps_many(log_pi[j : j + 1, :k], losses[j : j + 1, :, :k], 2)
        np.testing.assert_allclose(got[j, :k], want[0], rtol=1e-12, atol=1e-12)
        assert np.isneginf(got[j, k:]).all()
        np.testing.assert_allclose(loglik[j], ll[0], rtol=1e-12)
