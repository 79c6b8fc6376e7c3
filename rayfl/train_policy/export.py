"""The exported policy: ``policy/policy.npz`` and its ``policy.json``.

``rayfl train-policy`` writes them at every checkpoint and at the end
(:func:`export_policy`); :class:`policies.learned.LearnedPolicy` reads them.
``policy.json`` says how the policy was trained (:func:`policy_meta`: the
mode, reward, decoder, controls and the feature columns, a moving world's
too) and how much (:func:`trained_meta`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rayfl.config import RunConfig
from rayfl.registry import load, topology_of
from rayfl.rl.config import RLConfig
from rayfl.train_policy.algorithm import learned_controls

__all__ = ["export_policy", "policy_meta", "trained_meta"]


def export_policy(algo: Any, out: Path, meta: dict[str, Any]) -> None:
    """Write ``out/policy.npz`` and ``out/policy.json`` from the learner's module."""
    from rayfl.rl.module import export_arrays

    learned = "policies.learned:"
    features = meta.get("features") or load("policies.features:FEATURE_NAMES")

    module = algo.get_module()
    arrays = export_arrays(module)
    info = {
        "format": load(learned + "FORMAT"),
        "version": load(learned + "FORMAT_VERSION"),
        "features": list(features),
        "hidden": [
            int(a.shape[1])
            for k, a in sorted(arrays.items())
            if k[:4] == "pi_w" and k[4:].isdigit()
        ],
        **meta,
    }
    tmp = out.with_name(out.name + ".new")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    np.savez(tmp / "policy.npz", **arrays)  # type: ignore[arg-type]  # numpy stubs: **kwds vs allow_pickle
    (tmp / "policy.json").write_text(json.dumps(info, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


def policy_meta(cfg: RunConfig, rl: RLConfig) -> dict[str, Any]:
    """What the exported policy's ``policy.json`` says about its training."""
    controls = learned_controls(cfg)
    meta_rl = topology_of(cfg).rl_meta(cfg)
    features = load("policies.features:feature_names")  # a moving world's too
    return {
        "mode": rl.mode,
        "reward": rl.reward,
        "num_clients": cfg.data.num_clients,
        "num_subchannels": meta_rl["num_subchannels"],
        "controls": list(controls),
        "control_centers": list(controls.values()),
        # how the scores were decoded in training (policies.learned)
        "selection": meta_rl["selection"],
        "features": list(features(meta_rl.get("observation_keys", ()))),
        "config": cfg.name,
    }


def trained_meta(
    meta: dict[str, Any], iteration: int, rows: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """``meta`` with how much training the exported policy had.

    ``iterations`` and ``env_steps`` (the env steps sampled over every
    iteration, resumed ones included): a policy with 0 ``env_steps`` is an
    untrained network, which :class:`policies.learned.LearnedPolicy` refuses
    unless ``allow_untrained=True``.
    """
    steps = sum(float(r.get("env_steps", 0.0) or 0.0) for r in rows)
    return {**meta, "iterations": iteration, "env_steps": int(steps)}
