"""The runner's hooks of the three topology plug-ins, from configs alone (no Ray).

Oracles: the rules the runner applied by topology name before the plug-ins
(issue 46): the star evaluates every round unless its policy picks a client
set; D2D has its own rows, no per-client summary and its own summary.json; the
hierarchy keeps the config's settings. Contexts carry what each topology's
policies read (the star's link and controls, the hierarchy's link from
``topology.cost``, D2D's ``topology.epsilon``).
"""

from __future__ import annotations

import pytest

from rayfl.config import load_config
from rayfl.engine.loop import LoopSettings
from rayfl.registry import topology_of

QUICK = "examples/quickstart.yaml"
HIER = "examples/h2fdp_fmnist.yaml"
D2D = "examples/pfedwn_d2d.yaml"


def _base(cfg):
    return LoopSettings(cfg.rounds, eval_every=cfg.eval_every, wireless=True)


@pytest.mark.parametrize(
    ("overrides", "every_round"),
    [
        ({"scheduler.policy": "best_channel"}, True),
        ({"scheduler.policy": "all"}, False),
        ({"scheduler.policy": "random"}, True),  # on a wireless uplink: subchannels
        ({"scheduler.policy": "random", "wireless": None}, False),
    ],
)
def test_the_star_evaluates_every_round_unless_its_policy_picks_a_set(
    overrides, every_round
):
    cfg = load_config(QUICK, overrides)
    settings = topology_of(cfg).loop_settings(cfg, _base(cfg))
    assert settings.evaluate_every_round is every_round
    assert settings.records is None and settings.client_summary


def test_d2d_rows_and_summary_are_its_own():
    cfg = load_config(D2D, {"rounds": 3})
    plugin = topology_of(cfg)
    settings = plugin.loop_settings(cfg, _base(cfg))
    assert settings.records is not None
    assert not settings.client_summary and not settings.wireless
    assert settings.rounds == 3 and settings.eval_every == 1
    star = load_config(QUICK)
    assert topology_of(star).summary(object(), []) is None  # the shared summary


def test_the_hierarchy_keeps_the_configs_settings():
    cfg = load_config(HIER)
    base = _base(cfg)
    assert topology_of(cfg).loop_settings(cfg, base) == base


def test_contexts_carry_what_each_topologys_policies_read():
    star = load_config(QUICK, {"algorithm.kind": "fedavg"})
    context = topology_of(star).context(star)
    assert context.topology == "star" and context.model_dim == 1
    assert context.link.bandwidth_hz == star.wireless.bandwidth_hz
    assert context.control_names == ("lr",)
    hier = load_config(HIER)
    context = topology_of(hier).context(hier)
    assert context.topology == "hierarchical"
    assert context.link.bandwidth_hz == hier.topology.cost.bandwidth_hz
    d2d = load_config(D2D, {"topology.epsilon": 0.3})
    context = topology_of(d2d).context(d2d)
    assert context.topology == "d2d" and context.selection_epsilon == 0.3


def test_channel_threshold_takes_epsilon_from_the_d2d_context():
    from rayfl.d2d.selection import target_policy

    cfg = load_config(D2D, {"topology.epsilon": 0.3})
    policy = target_policy(cfg.topology, 6, target=0, seed=1)
    assert type(policy).__name__ == "ChannelThresholdPolicy"
    assert policy.epsilon == 0.3
    given = target_policy(cfg.topology, 6, target=0, seed=1, params={"epsilon": 0.1})
    assert given.epsilon == 0.1  # a parameter the user passes wins
