"""The PPO RLModule of the learned scheduler and its numpy export.

One MLP shared by all clients scores each client from its feature row
(``policies.features``); the PPO action distribution is a diagonal Gaussian over
the N scores (and, with ``model_config["outputs"]`` = 1 + C, each client's C
control values after its score) with one learned log σ. The value net runs a second per-client
trunk, pools it over clients (mean and max) and maps the pool to V(s). Both are
permutation-equivariant / invariant in the clients and independent of N.

Needs the ``rl`` extra (RLlib). The export (:func:`export_arrays`) is the
``policy.npz`` that :class:`policies.learned.LearnedPolicy` runs in numpy.

Symbol table: x (B, N, F) → ``batch["obs"]``, s (B, N) → score means, σ →
``exp(log_std)``, V (B,) → ``compute_values``.

Implementation details:
    1. Score head initialised with std 0.01 weights (CleanRL's actor init): the
       untrained policy scores all clients ≈ equal, so its first rollouts are
       close to uniformly random top-K selections.
    2. ``model_config["init_from"]`` (a ``policy.npz``) loads policy and value
       weights in ``setup()``, so the learner's module and every EnvRunner's
       copy start from the same file (the surrogate → emulate curriculum);
       ``model_config["reset_log_std"]`` then overwrites the loaded log σ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule
from torch import nn

__all__ = ["ScoreRLModule", "export_arrays", "load_arrays"]


def _trunk(in_features: int, hidden: list[int]) -> nn.ModuleList:
    sizes = [in_features, *hidden]
    return nn.ModuleList(
        nn.Linear(a, b) for a, b in zip(sizes, sizes[1:], strict=False)
    )


def _run(trunk: nn.ModuleList, x: torch.Tensor) -> torch.Tensor:
    for layer in trunk:
        x = torch.tanh(layer(x))
    return x


class ScoreRLModule(TorchRLModule, ValueFunctionAPI):
    """Per-client score policy + pooled value function (module docstring)."""

    def setup(self) -> None:
        """Build the networks from ``model_config`` (``hidden``, ``initial_log_std``)."""
        config = dict(self.model_config or {})  # type: ignore[arg-type]  # RLlib: a dict here
        hidden = [int(h) for h in config.get("hidden", [64, 64])]
        features = int(self.observation_space.shape[-1])  # type: ignore[union-attr, index]  # RLlib: set by now
        self.pi_trunk = _trunk(features, hidden)
        self.pi_out = nn.Linear(hidden[-1], int(config.get("outputs", 1)))
        nn.init.normal_(self.pi_out.weight, std=0.01)
        nn.init.zeros_(self.pi_out.bias)
        self.log_std = nn.Parameter(
            torch.tensor(float(config.get("initial_log_std", 0.0)))
        )
        self.vf_trunk = _trunk(features, hidden)
        self.vf_pool = nn.Linear(2 * hidden[-1], hidden[-1])
        self.vf_out = nn.Linear(hidden[-1], 1)
        if config.get("init_from"):
            with np.load(Path(config["init_from"])) as data:
                load_arrays(self, {k: data[k] for k in data.files})
            if config.get("reset_log_std") is not None:
                with torch.no_grad():
                    self.log_std.fill_(float(config["reset_log_std"]))

    def scores(self, obs: torch.Tensor) -> torch.Tensor:
        """Return the action means (B, N·O) of features (B, N, F), client-major.

        O = 1 (the score) or 1 + C with learned controls (``model_config
        ["outputs"]``).
        """
        return self.pi_out(_run(self.pi_trunk, obs)).flatten(-2)

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        loc = self.scores(batch[Columns.OBS])
        log_std = self.log_std.expand_as(loc)
        return {Columns.ACTION_DIST_INPUTS: torch.cat([loc, log_std], dim=-1)}

    def compute_values(
        self, batch: dict[str, Any], embeddings: Any = None
    ) -> torch.Tensor:
        """Return V(s), shape (B,): per-client trunk, mean+max pool, MLP."""
        h = _run(self.vf_trunk, batch[Columns.OBS])
        pooled = torch.cat([h.mean(dim=-2), h.amax(dim=-2)], dim=-1)
        return self.vf_out(torch.tanh(self.vf_pool(pooled))).squeeze(-1)


def _linears(module: ScoreRLModule) -> dict[str, nn.Linear]:
    layers = {f"pi_{i}": layer for i, layer in enumerate(module.pi_trunk)}
    layers["pi__out"] = module.pi_out
    layers.update({f"vf_{i}": layer for i, layer in enumerate(module.vf_trunk)})
    layers["vf__pool"] = module.vf_pool
    layers["vf__out"] = module.vf_out
    return layers  # type: ignore[return-value]  # torch stubs: ModuleList holds Module


def export_arrays(module: ScoreRLModule) -> dict[str, np.ndarray]:
    """Return the module's weights as the ``policy.npz`` arrays (W as (in, out))."""
    out: dict[str, np.ndarray] = {}
    with torch.no_grad():
        for name, layer in _linears(module).items():
            prefix, index = name.split("_", 1)
            out[f"{prefix}_w{index}"] = layer.weight.T.detach().cpu().numpy()
            out[f"{prefix}_b{index}"] = layer.bias.detach().cpu().numpy()
        out["log_std"] = module.log_std.detach().cpu().numpy().reshape(1)
    # copies: ``.numpy()`` shares memory with the live parameters
    return {k: np.array(v, dtype=np.float32) for k, v in out.items()}


def load_arrays(module: ScoreRLModule, arrays: dict[str, np.ndarray]) -> None:
    """Copy ``policy.npz`` arrays into the module (inverse of :func:`export_arrays`).

    Raises:
        ValueError: If an array is missing or its shape differs (another
            ``hidden``).
    """
    with torch.no_grad():
        for name, layer in _linears(module).items():
            prefix, index = name.split("_", 1)
            for key, param, transpose in (
                (f"{prefix}_w{index}", layer.weight, True),
                (f"{prefix}_b{index}", layer.bias, False),
            ):
                if key not in arrays:
                    raise ValueError(f"init_from: array {key!r} missing")
                value = torch.as_tensor(np.asarray(arrays[key], dtype=np.float32))
                value = value.T if transpose else value
                if tuple(value.shape) != tuple(param.shape):
                    raise ValueError(
                        f"init_from: {key} has shape {tuple(value.shape)}, the module "
                        f"needs {tuple(param.shape)} (same rl.hidden?)"
                    )
                param.copy_(value)
        module.log_std.copy_(torch.as_tensor(float(np.ravel(arrays["log_std"])[0])))
