"""A fourth topology defined in this file runs everywhere a shipped one does (issue 46).

``Ring`` is a toy topology: the star's engine under its own ``topology.kind``,
with its own config section (``hops``), its own cross-section rule, its own
default policy and its own benchmark scenario. It is registered by one line
(:func:`rayfl.registry.register_topology`) and no project file names it. Then:

- ``rayfl.run`` runs it for 2 rounds (and equals the star on the same config);
- its env (found by role, ``topology_of(cfg).envs["single"]``) plays an episode
  on the real emulation, and its RL env one on the surrogate;
- ``rayfl bench policies --topology ring`` runs its one tiny scenario;
- a notebook session does not keep its actors warm (it lacks the capability).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd
import pytest
from pydantic import BaseModel, ConfigDict, Field

import rayfl
from rayfl import registry
from rayfl.config import ConfigError, load_config
from rayfl.registry import build_policy, load, policy_class, topology_of
from rayfl.star.plugin import Star


class RingSection(BaseModel):
    """The ring's ``topology:`` section."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["ring"] = "ring"
    hops: int = Field(1, ge=1, description="Neighbours each way on the ring.")


TINY: dict[str, Any] = {
    "name": "ring",
    "rounds": 2,
    "data": {"dataset": "digits", "num_clients": 4, "min_partition_size": 20},
    "model": {"kind": "mlp", "hidden": [8]},
    "algorithm": {"kind": "fedavg", "local_steps": 1, "batch_size": 16, "lr": 0.1},
    "wireless": {"num_subchannels": 2},
    "output": {"progress": False, "plots": False},
}


class Ring(Star):
    """Clients on a ring, scheduled over the star's uplink (a toy)."""

    name = "ring"
    aliases = ()
    config = RingSection
    default_policy = "round_robin"
    capabilities = frozenset()

    def check_run(self, cfg: Any) -> None:
        super().check_run(cfg)
        if cfg.topology.hops >= cfg.data.num_clients:
            raise ValueError(
                f"topology.hops ({cfg.topology.hops}) must be < data.num_clients "
                f"({cfg.data.num_clients})"
            )

    def scenarios(self) -> dict[str, tuple[Any, ...]]:
        config = {**TINY, "name": "ring-tiny", "topology": {"kind": "ring"}}
        return {"ring-tiny": ("small", config)}


@pytest.fixture
def ring(monkeypatch):
    """Register the ring for one test; the registry is restored afterwards."""
    monkeypatch.setattr(registry, "TOPOLOGIES", dict(registry.TOPOLOGIES))
    monkeypatch.setattr(registry, "_PLUGINS", dict(registry._PLUGINS))
    registry.register_topology("ring", f"{__name__}:Ring")  # the one line
    return topology_of("ring")


def _config(tmp_path, kind: str = "ring", **changes: Any) -> Any:
    tree = {**TINY, "topology": {"kind": kind}, **changes}
    return load_config(tree, {"output.dir": str(tmp_path / kind)})


def test_the_ring_is_a_config_section_with_its_own_rules(ring, tmp_path):
    cfg = _config(tmp_path)
    assert isinstance(cfg.topology, RingSection) and topology_of(cfg) is ring
    assert cfg.scheduler.policy == "round_robin"  # its default_policy
    with pytest.raises(ConfigError, match=r"topology.hops \(4\) must be <"):
        load_config({**TINY, "topology": {"kind": "ring", "hops": 4}})
    # the star's policies run on it; a D2D-only policy does not
    assert "ring" not in policy_class("random_neighbors").topologies
    with pytest.raises(ConfigError, match="is meant for topology.kind=d2d; got ring"):
        load_config(
            {**TINY, "topology": {"kind": "ring"}},
            ["scheduler.policy=random_neighbors"],
        )


def test_rayfl_run_runs_the_ring_for_two_rounds(ray_session, ring, tmp_path):
    # the star at the ring's default policy
    star = rayfl.run(
        _config(tmp_path, kind="star", scheduler={"policy": "round_robin"})
    )
    toy = rayfl.run(_config(tmp_path))

    assert toy.summary["status"] == "completed"
    written = (toy.run_dir / "config.yaml").read_text()
    assert "kind: ring" in written and "hops: 1" in written
    assert toy.rounds["round"].tolist() == [0, 1]
    # the star's engine and uplink, the same schedule: the same numbers
    np.testing.assert_array_equal(
        toy.rounds["global_acc"].to_numpy(), star.rounds["global_acc"].to_numpy()
    )


def test_the_rings_env_plays_an_episode_on_the_emulation(ray_session, ring, tmp_path):
    cfg = _config(tmp_path)
    env = load(ring.envs["single"])(cfg, mode="emulate")
    policy = build_policy(cfg.scheduler.policy, env, topology="ring", seed=0)
    try:
        obs, _ = env.reset(seed=1)
        rounds, truncated = [], False
        while not truncated:
            obs, reward, terminated, truncated, info = env.step(policy(obs))
            assert not terminated and np.isfinite(reward)
            rounds.append(info["round"])
    finally:
        env.close()
    assert rounds == [1, 2]


def test_the_rings_rl_env_plays_an_episode(ring, tmp_path):
    from envs.rl import make_rl_env

    cfg = _config(tmp_path)
    env = make_rl_env(cfg, mode="surrogate")
    obs, _ = env.reset(seed=0)
    rewards, truncated = [], False
    while not truncated:
        obs, reward, _, truncated, _ = env.step(env.action_space.sample())
        rewards.append(float(reward))
    env.close()
    assert len(rewards) == 2 and np.isfinite(rewards).all()
    assert obs.shape[0] == cfg.data.num_clients


def test_rayfl_bench_policies_runs_the_rings_scenario(ring, tmp_path):
    from rayfl.benchmarks.policies import main

    main(
        [
            "--topology",
            "ring",
            "--mode",
            "surrogate",
            "--policies",
            "round_robin,random,constant_tuned",
            "--seeds",
            "1000",
            "--train-seeds",
            "0",
            "--out",
            str(tmp_path),
        ]
    )
    episodes = pd.read_csv(tmp_path / "episodes.csv")
    assert set(episodes["scenario"]) == {"ring-tiny"}
    assert set(episodes["topology"]) == {"ring"}
    assert set(episodes["policy"]) == {"round_robin", "random", "constant_tuned"}
    assert episodes["return"].notna().all()


def test_a_notebook_session_does_not_keep_the_rings_actors_warm(ring, tmp_path):
    from rayfl.notebook import Session

    class _Live:
        topology = "ring"

        def __init__(self, config: Any) -> None:
            self.config = config

    cfg = _config(tmp_path)
    session = Session()
    session._engine = _Live(cfg)
    session._completed = True
    assert session.reuse_blocker(cfg) == "topology ring does not keep its actors warm"
