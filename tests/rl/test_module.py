"""The PPO RLModule on its own (no Ray cluster): save/load, export, init_from."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from rayfl.train_policy import rllib_available

pytestmark = pytest.mark.skipif(
    not rllib_available(),
    reason="RLlib not installed: pip install -e '.[rl]' (ray[rllib]==2.60.0)",
)


def _module(**model_config):
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from policies.features import NUM_FEATURES
    from rayfl.rl.module import ScoreRLModule

    spec = RLModuleSpec(
        module_class=ScoreRLModule,
        observation_space=spaces.Box(-np.inf, np.inf, (7, NUM_FEATURES), np.float32),
        action_space=spaces.Box(-1.0, 1.0, (7,), np.float32),
        model_config={"hidden": [16, 8], **model_config},
    )
    return spec.build()


def _features(batch=5):
    from policies.features import NUM_FEATURES

    rng = np.random.default_rng(0)
    return rng.normal(size=(batch, 7, NUM_FEATURES)).astype(np.float32)


def _outputs(module, features):
    import torch

    with torch.no_grad():
        batch = {"obs": torch.as_tensor(features)}
        dist = module.forward_inference(batch)["action_dist_inputs"].numpy()
        values = module.compute_values(batch).numpy()
    return dist, values


def test_shapes_and_permutation_equivariance():
    module = _module()
    features = _features()
    dist, values = _outputs(module, features)
    assert dist.shape == (5, 14) and values.shape == (5,)
    perm = np.random.default_rng(1).permutation(7)
    dist_p, values_p = _outputs(module, features[:, perm])
    np.testing.assert_allclose(
        dist_p[:, :7], dist[:, :7][:, perm], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(values_p, values, rtol=1e-5, atol=1e-6)


def test_rllib_checkpoint_round_trip_gives_identical_outputs(tmp_path):
    from ray.rllib.core.rl_module.rl_module import RLModule

    module = _module()
    with __import__("torch").no_grad():
        for p in module.parameters():
            p.add_(0.1)  # not the initial weights
    module.save_to_path(str(tmp_path / "module"))
    restored = RLModule.from_checkpoint(str(tmp_path / "module"))
    for a, b in zip(
        _outputs(module, _features()), _outputs(restored, _features()), strict=True
    ):
        np.testing.assert_array_equal(a, b)


def test_export_runs_identically_in_numpy_and_init_from_restores(tmp_path):
    from policies.learned import ScoreNetwork
    from rayfl.rl.module import export_arrays

    module = _module(initial_log_std=-0.7)
    features = _features()
    dist, values = _outputs(module, features)
    arrays = export_arrays(module)
    # numpy inference (policies.learned) equals the torch module's mean scores
    for b in range(len(features)):
        np.testing.assert_allclose(
            ScoreNetwork(arrays)(features[b]), dist[b, :7], rtol=1e-5, atol=1e-6
        )
    np.testing.assert_allclose(dist[:, 7:], -0.7, rtol=1e-6)
    # a fresh module initialised from the export gives the same outputs
    np.savez(tmp_path / "policy.npz", **arrays)
    again = _module(init_from=str(tmp_path / "policy.npz"))
    for a, b in zip((dist, values), _outputs(again, features), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_init_from_with_other_hidden_sizes_is_refused(tmp_path):
    from rayfl.rl.module import export_arrays

    np.savez(tmp_path / "policy.npz", **export_arrays(_module()))
    with pytest.raises(ValueError, match="same rl.hidden"):
        _module(hidden=[4], init_from=str(tmp_path / "policy.npz"))


def test_reset_log_std_overrides_only_the_loaded_log_std(tmp_path):
    import torch

    from rayfl.rl.module import export_arrays

    trained = _module(initial_log_std=0.3)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(0.05)  # not the initial weights
    arrays = export_arrays(trained)
    np.savez(tmp_path / "policy.npz", **arrays)
    module = _module(init_from=str(tmp_path / "policy.npz"), reset_log_std=-1.25)
    loaded = export_arrays(module)
    assert float(module.log_std) == pytest.approx(-1.25)
    assert arrays["log_std"][0] == pytest.approx(0.35)  # what it would have loaded
    assert set(loaded) == set(arrays)
    for key in arrays:
        if key != "log_std":
            np.testing.assert_array_equal(loaded[key], arrays[key], err_msg=key)
    dist, _ = _outputs(module, _features())
    np.testing.assert_allclose(dist[:, 7:], -1.25, rtol=1e-6)
    # without reset_log_std the loaded value stays
    kept = _module(init_from=str(tmp_path / "policy.npz"))
    assert float(kept.log_std) == pytest.approx(0.35)
