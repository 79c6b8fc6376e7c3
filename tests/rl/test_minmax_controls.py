"""``minmax`` takes its control names from the algorithm, everywhere (issue 34).

The comparison that died after 5 minutes (``--policies learned,minmax`` on a
FedAvg config: minmax assumed Ditto's three controls) now runs, and a policy
that cannot act in a run fails before any run starts.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from rayfl.config import ConfigError, load_config

STAR = {
    "name": "mm",
    "rounds": 2,
    "data": {"dataset": "digits", "num_clients": 6, "partition": "iid"},
    "model": {"kind": "mlr"},
    "wireless": {"num_subchannels": 2},
    "output": {"progress": False, "plots": False},
    "scheduler": {"policy": "minmax"},
}


@pytest.mark.parametrize(
    ("algorithm", "names"),
    [
        ({"kind": "fedavg"}, ("lr",)),
        ({"kind": "ditto"}, ("lr", "personal_lr", "lam")),
    ],
    ids=["fedavg", "ditto"],
)
def test_a_run_context_names_the_algorithms_controls(algorithm, names):
    from rayfl.registry import make_policy
    from rayfl.star.actions import StarActions
    from rayfl.star.context import star_context

    cfg = load_config({**STAR, "algorithm": algorithm})
    uplink = SimpleNamespace(
        participation_target=lambda: None, noise_std=None, server_noise_std=None
    )
    context = star_context(SimpleNamespace(config=cfg, dim=65, uplink=uplink))
    observation_space, action_space = StarActions.from_config(
        cfg, controls=True
    ).spaces()

    policy = make_policy("minmax", (observation_space, action_space), context=context)
    action = policy(observation_space.sample())

    assert context.control_names == names
    assert policy.control_names == names
    assert action["controls"].shape == (6, len(names))
    assert action_space.contains(action)


def test_compare_checks_every_policy_before_any_run(monkeypatch):
    import rayfl.compare.variants as compare_module

    def no_run(*args, **kwargs):
        raise AssertionError("a run started before the policies were checked")

    monkeypatch.setattr(compare_module, "run", no_run)
    base = load_config({**STAR, "algorithm": {"kind": "sparse_dp"}})

    with pytest.raises(ConfigError, match=r"scheduler.policy=minmax cannot run") as e:
        compare_module.compare(base, ["round_robin", "minmax"])

    assert "sparsity" in str(e.value) and "\n" not in str(e.value)


def test_compare_refuses_a_missing_learned_checkpoint_before_any_run(monkeypatch):
    import rayfl.compare.variants as compare_module

    monkeypatch.setattr(compare_module, "run", None)  # never reached
    base = load_config(STAR)

    with pytest.raises(ConfigError, match="scheduler.policy=learned"):
        compare_module.compare(base, ["minmax", "learned:checkpoint=/nonexistent"])


@pytest.mark.parametrize("algorithm", ["fedavg", "ditto"])
def test_policy_builds_on_fedavg_and_ditto_without_hand_parameters(algorithm):
    from rayfl.compare.variants import check_policy_builds

    cfg = load_config({**STAR, "algorithm": {"kind": algorithm}})

    check_policy_builds(cfg)  # no scheduler.params.control_names needed


def test_env_built_minmax_gets_the_envs_control_names():
    from envs.star.scheduling import WirelessFLEnv
    from rayfl.registry import make_policy
    from rayfl.train_policy.evaluate import env_policy_params

    env = WirelessFLEnv(STAR, mode="surrogate", controls=True)

    policy = make_policy("minmax", env, **env_policy_params("minmax", env, {}))
    obs, _ = env.reset(seed=0)
    action = policy(obs)
    _, _, _, _, info = env.step(action)

    assert policy.control_names == ("lr",)
    np.testing.assert_array_equal(action["controls"].shape, (6, 1))
    assert env.action_space.contains(action)


@pytest.mark.slow
def test_fast_compare_runs_learned_and_minmax_on_fedavg(ray_session, tmp_path):
    from rayfl.compare.seeds import fast_table

    base = load_config({**STAR, "output": {**STAR["output"], "dir": str(tmp_path)}})

    table = fast_table(base, ["learned", "minmax"], [0])

    assert table["policy"].tolist() == ["learned", "minmax"]
    assert np.isfinite(table["final_acc"]).all()
