"""Every registered policy on every env of a topology it declares, in both modes.

For each topology's env (WirelessFL-v0, HierarchicalFL-v0, D2DNeighbor-v0) and
mode: ``check_env`` passes, and every policy that declares the topology drives a
two-step episode (each action in ``action_space``, finite rewards). A policy on
a topology it does not declare is refused by config validation in one line
naming the policy field. Surrogate mode (no Ray) runs in the default suite;
emulate mode (one Ray session for the module) is ``slow``.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env, data_equivalence

from envs.d2d import D2DNeighborEnv, make_selection_policies, policy_action
from envs.hierarchy.scheduling import EdgePolicies, HierarchicalSchedulingEnv
from envs.star.scheduling import WirelessFLEnv
from rayfl.config import ConfigError, load_config
from rayfl.registry import POLICIES, make_policy, policy_class, topology_names

TOPOLOGIES = topology_names()

_DATA = {
    "dataset": "digits",
    "num_clients": 8,
    "partition": "dirichlet",
    "alpha": 1.0,
    "min_partition_size": 20,
}
_BASE: dict[str, Any] = {
    "seed": 0,
    "rounds": 3,
    "data": _DATA,
    "model": {"kind": "mlp", "hidden": [16]},
    "algorithm": {"kind": "fedavg", "local_steps": 3, "batch_size": 16, "lr": 0.1},
    "output": {"progress": False, "plots": False},
}
CONFIGS: dict[str, dict[str, Any]] = {
    "star": {**_BASE, "wireless": {"num_subchannels": 3}},
    "hierarchical": {
        **_BASE,
        "topology": {
            "kind": "hierarchical",
            "num_edges": 2,
            "tau": 3,
            "local_period": 3,
            "scheduling": {"subchannels_per_edge": 2},
        },
    },
    "d2d": {
        **_BASE,
        "seed": 3,
        "data": {**_DATA, "num_clients": 6, "alpha": 0.5, "min_partition_size": 30},
        "topology": {"kind": "d2d", "target": 0, "epsilon": 0.2},
    },
}
#: Policy parameters a tiny fedavg run needs (minmax defaults to pFedMe's controls).
PARAMS = {"minmax": {"control_names": ["lr"]}}
MODES = ("surrogate", "emulate")

#: Declared pairs that cannot run: strict xfail, so fixing them fails the test.
RUN_BUGS: dict[tuple[str, str], str] = {}
#: Undeclared pairs whose refusal is not check_policy's one-line reason.
REFUSAL_BUGS: dict[tuple[str, str], str] = {}


def _mark(
    cases: list[tuple[str, ...]], bugs: dict[tuple[str, str], str], raises: type
) -> list:
    """``pytest.param`` of each case (name, topology, ...), known bugs xfailed."""
    out = []
    for case in cases:
        marks = [pytest.mark.slow] if "emulate" in case else []
        if case[:2] in bugs:
            reason = bugs[case[:2]]
            marks.append(pytest.mark.xfail(strict=True, raises=raises, reason=reason))
        out.append(pytest.param(*case, id="-".join(case), marks=marks))
    return out


_ALL = [(name, topo) for name in sorted(POLICIES) for topo in TOPOLOGIES]
DECLARED = [p for p in _ALL if p[1] in policy_class(p[0]).topologies]
UNDECLARED = [p for p in _ALL if p[1] not in policy_class(p[0]).topologies]


def _uses_controls(name: str) -> bool:
    return bool(getattr(policy_class(name), "uses_controls", False))


def _participants_only(name: str) -> bool:
    return "assignment" not in policy_class(name).action_parts


def _build(topology: str, mode: str, controls: bool, participants: bool) -> Any:
    config = CONFIGS[topology]
    if topology == "star":
        return WirelessFLEnv(
            config, mode=mode, controls=controls, participants=participants
        )
    if topology == "hierarchical":
        return HierarchicalSchedulingEnv(config, mode=mode, participants=participants)
    return D2DNeighborEnv(config, mode=mode)


class _Envs:
    """One env per (topology, mode, controls, participants), built on first use.

    With ``single`` only one env lives at a time: an emulate env holds the
    session's CPUs, so a second one would wait for them forever.
    """

    def __init__(self, single: bool = False) -> None:
        self.single = single
        self.made: dict[tuple[str, str, bool, bool], Any] = {}

    def get(
        self, topology: str, mode: str, controls: bool = False, participants=False
    ) -> Any:
        key = (topology, mode, controls, participants)
        if key not in self.made:
            if self.single:
                self.close()
            self.made[key] = _build(topology, mode, controls, participants)
        return self.made[key]

    def close(self) -> None:
        for env in self.made.values():
            env.close()
        self.made.clear()


@pytest.fixture(scope="module")
def surrogate_envs():
    made = _Envs()
    yield made
    made.close()


@pytest.fixture(scope="module")
def emulate_envs(ray_session):
    made = _Envs(single=True)
    yield made
    made.close()


@pytest.fixture
def envs(request, mode):
    return request.getfixturevalue(f"{mode}_envs")


#: Envs that fail check_env: strict xfail, so fixing them fails the test.
CHECK_BUGS: dict[tuple[str, str], list[Any]] = {}
#: (topology, controls, mode), grouped by mode so one emulate env lives at a time.
CHECKED = [
    pytest.param(
        topo,
        controls,
        mode,
        id=f"{topo}{'-controls' if controls else ''}-{mode}",
        marks=[pytest.mark.slow, *CHECK_BUGS.get((topo, mode), [])]
        if mode == "emulate"
        else [],
    )
    for mode in MODES
    for topo, controls in (
        ("star", False),
        ("star", True),
        ("hierarchical", False),
        ("d2d", False),
    )
]


@pytest.mark.parametrize(("topology", "controls", "mode"), CHECKED)
def test_check_env(envs, topology, mode, controls):
    env = envs.get(topology, mode, controls)
    check_env(env.unwrapped, skip_render_check=True)


def _policy_driver(name: str, env: Any, topology: str, mode: str) -> Any:
    """Return ``obs -> action`` for policy ``name``, built as its topology builds it."""
    params = PARAMS.get(name, {})
    if topology == "star":
        policy = make_policy(name, env, **params)
        policy.reset(seed=1)
        return policy
    if topology == "hierarchical":
        policies = EdgePolicies(env, name, **params)
        policies.reset(seed=0)
        return policies
    policies = make_selection_policies(env, name, params)
    return lambda obs: policy_action(env, policies, obs)


#: (name, topology, mode), ordered by env so each emulate env is built once here.
EPISODES = sorted(
    ((name, topo, mode) for name, topo in DECLARED for mode in MODES),
    key=lambda c: (
        c[2] == "emulate",
        c[1],
        _uses_controls(c[0]),
        _participants_only(c[0]),
        c[0],
    ),
)


@pytest.mark.parametrize(
    ("name", "topology", "mode"), _mark(EPISODES, RUN_BUGS, ValueError)
)
def test_policy_drives_a_short_episode(envs, name, topology, mode):
    star = topology == "star"
    env = envs.get(
        topology,
        mode,
        _uses_controls(name) and star,
        _participants_only(name) and topology in ("star", "hierarchical"),
    )
    obs, _ = env.reset(seed=env.config.seed)  # the hierarchy rebuilds on a new seed
    act = _policy_driver(name, env, topology, mode)
    for _ in range(2):
        assert env.observation_space.contains(obs)
        action = act(obs)
        assert env.action_space.contains(action), (name, action)
        obs, reward, terminated, truncated, _ = env.step(action)
        assert np.isfinite(reward), (name, reward)
        assert not terminated and not truncated


def _rollout(env: Any, topology: str, seed: int) -> list[Any]:
    obs, _ = env.reset(seed=seed)
    act = _policy_driver("random", env, topology, "surrogate")
    out = [obs]
    for _ in range(2):
        obs, reward, *_ = env.step(act(obs))
        out += [obs, reward]
    return out


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_same_seed_same_rollout(surrogate_envs, topology):
    env = surrogate_envs.get(topology, "surrogate")
    seed = env.config.seed
    first = _rollout(env, topology, seed)
    assert data_equivalence(first, _rollout(env, topology, seed), exact=True)
    assert not data_equivalence(first, _rollout(env, topology, seed + 1))
    _rollout(env, topology, seed)  # leave the env on its config seed


def _config_with(topology: str, name: str) -> dict[str, Any]:
    config = copy.deepcopy(CONFIGS[topology])
    config["scheduler"] = {"policy": name}
    return config


@pytest.mark.parametrize(
    ("name", "topology"), _mark(UNDECLARED, REFUSAL_BUGS, AssertionError)
)
def test_undeclared_topology_is_refused_in_one_line(name, topology):
    with pytest.raises(ConfigError) as error:
        load_config(_config_with(topology, name))
    header, *reasons = str(error.value).splitlines()
    assert header == "invalid config:"
    assert len(reasons) == 1, reasons
    reason = reasons[0].strip()
    assert reason.startswith(f"scheduler.policy={name} "), reason
    assert f"got {topology}" in reason or f"topology.kind={topology}" in reason


def test_the_matrix_covers_every_policy_and_topology():
    assert {name for name, _ in DECLARED} == set(POLICIES)
    assert {topo for _, topo in DECLARED} == set(TOPOLOGIES)
    assert len(DECLARED) + len(UNDECLARED) == len(POLICIES) * len(TOPOLOGIES)
    assert set(RUN_BUGS) <= set(DECLARED) and set(REFUSAL_BUGS) <= set(UNDECLARED)


#: The registered id of each topology's env.
ENV_ID = {
    "star": "WirelessFL-v0",
    "hierarchical": "HierarchicalFL-v0",
    "d2d": "D2DNeighbor-v0",
}


@pytest.mark.parametrize("rounds", [2, 23])
@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_gym_make_truncates_after_config_rounds(topology, rounds):
    """Every id ends its episode after ``config.rounds`` steps, not a fixed count.

    ``WirelessFL-v0`` was registered with ``max_episode_steps=20`` whatever the
    config said. ``info["round"]`` counts the rounds done, on every topology.
    """
    import gymnasium as gym

    import envs  # noqa: F401  (registers the ids)

    config = {**copy.deepcopy(CONFIGS[topology]), "rounds": rounds}
    env = gym.make(ENV_ID[topology], config=config, mode="surrogate")
    try:
        obs, info = env.reset(seed=1)
        assert info["round"] == 0
        act = _policy_driver("random", env.unwrapped, topology, "surrogate")
        steps, truncated = 0, False
        while not truncated:
            obs, _, terminated, truncated, info = env.step(act(obs))
            steps += 1
            assert not terminated and info["round"] == steps
            assert steps <= rounds
        assert steps == rounds
    finally:
        env.close()


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_an_env_refuses_another_topologys_config_in_one_line(topology):
    other = "d2d" if topology != "d2d" else "star"
    want, got = topology, other
    with pytest.raises(ValueError) as error:
        _build_with(topology, CONFIGS[other])
    assert str(error.value).endswith(
        f"needs topology.kind={want}, got topology.kind={got}"
    )
    assert "\n" not in str(error.value)
    if topology == "hierarchical":  # has a default system since issue 34
        assert HierarchicalSchedulingEnv(None).config.topology.kind == "hierarchical"


def _build_with(topology: str, config: dict[str, Any]) -> Any:
    cls = {
        "star": WirelessFLEnv,
        "hierarchical": HierarchicalSchedulingEnv,
        "d2d": D2DNeighborEnv,
    }[topology]
    return cls(config, mode="surrogate")
