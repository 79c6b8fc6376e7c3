"""Learned scheduling: a per-client score network trained with PPO, then top-K.

The policy of ``rayfl train-policy`` (issue 11). Its action encoding is the
"priority scores + top-K" trick of FAVOR (Wang, Kaplan, Niu & Li, INFOCOM 2020:
a network scores every device, the top K are selected), here with the
subchannels matched by the Hungarian rule like the other policies: one small
MLP, shared by all clients, maps each client's features
(:func:`policies.features.client_features`) to a score; the K eligible clients
with the highest scores are scheduled and matched to subchannels maximising
Σ gain [dB] (:func:`policies.assignment.assign_subchannels`).

Inference is plain numpy on exported weights: neither RLlib nor torch is needed
to run a trained policy (``rayfl run ... scheduler.policy=learned``).

Symbol table: N → ``num_clients``, K → ``num_subchannels``, x_n (F,) → row n of
``client_features(obs)``, s_n → ``scores[n]``, W_i, b_i → ``pi_w{i}``,
``pi_b{i}``.

    h_0 = x_n,  h_{i+1} = tanh(h_i W_i + b_i),  s_n = h_L w_out + b_out

Checkpoint format (``policy/`` of a train-policy run directory):

| file | content |
|------|---------|
| ``policy.npz`` | ``pi_w0, pi_b0, …, pi_w_out, pi_b_out`` (policy; ``pi_w_out`` has 1 + C columns: the score, then C learned controls), ``log_std``, and the value net ``vf_*`` (used only to resume training) |
| ``policy.json`` | ``format`` (``"rayfl-score-mlp"``), ``version``, ``features``, ``hidden``, ``controls`` (their names, in column order), ``control_centers`` (their configured values in training), how it was trained |

Implementation details:
    1. Deterministic action: the mean of the Gaussian over scores (the PPO
       policy's mode); exploration noise is a training-time matter only.
    2. Ties in score go to the lower client id; ineligible clients are never
       selected; with fewer than K eligible clients all of them are scheduled.
    3. ``checkpoint=None`` loads the policy shipped in
       ``policies/checkpoints/learned_default`` (165 PPO iterations on the
       surrogate env of ``examples/rl_scheduler.yaml``, 42 iterations of
       emulate fine-tuning on real Fashion-MNIST, then 75 emulate iterations
       over four data partitions with the log-std reset to −1; see README;
       ``learned_single_partition`` is the previous one, fine-tuned on the
       seed-0 partition only), so
       ``make_policy("learned")``
       works out of the box; pass a run directory to use your own.
    4. The network sees only per-client features and K/N, so one checkpoint
       acts for any N and K (it was trained at one N, K; quality elsewhere is
       not guaranteed).
    5. Controls (``rl.controls``): a network with C > 0 control columns sets
       every client's controls when the run exposes them
       (``scheduler.controls: true``): output a ∈ ℝ, clipped to [−1, 1], maps
       piecewise linearly onto [low, c, high] of the control's range, where c
       is the value configured in training (``policy.json``'s
       ``control_centers``), so an untrained network sets the configured
       controls (:func:`controls_from_unit`, the decoding PPO trained
       through; a checkpoint without centers uses the middle of the range).
       A network without control columns leaves them to the config; a
       different number of controls than the run exposes is refused.
    6. A checkpoint whose ``policy.json`` says it sampled 0 env steps
       (``env_steps``, written by ``rayfl train-policy`` since issue 34) is
       an untrained network: loading it raises unless ``allow_untrained=True``.
       A checkpoint without ``env_steps`` (older ones) is loaded.
    7. ``untrained=True`` is the baseline "untrained network, learned
       decoder": a freshly initialised network as ``rayfl train-policy``
       starts from (:class:`rayfl.rl.module.ScoreRLModule`: PyTorch's default
       U(±1/√fan_in) for the hidden layers, N(0, 0.01²) score weights, zero
       score bias), drawn from ``init_seed``, decoded by the same top-K +
       Hungarian rule. It isolates what training adds over the decoder.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from gymnasium import spaces as gym_spaces

from policies.base import Action, Observation, Policy
from policies.features import (
    FEATURE_NAMES,
    check_feature_names,
    client_features,
    feature_names,
)
from rayfl.observation import CORE_KEYS

__all__ = [
    "DEFAULT_CHECKPOINT",
    "FORMAT",
    "LearnedPolicy",
    "ScoreNetwork",
    "check_trained",
    "controls_from_unit",
    "initial_arrays",
    "resolve_checkpoint",
    "select_top_k",
]

FORMAT = "rayfl-score-mlp"
FORMAT_VERSION = 1
DEFAULT_CHECKPOINT = Path(__file__).parent / "checkpoints" / "learned_default"


def controls_from_unit(
    values: npt.ArrayLike,
    low: npt.ArrayLike,
    high: npt.ArrayLike,
    center: npt.ArrayLike | None = None,
) -> npt.NDArray[np.float32]:
    """Map network outputs to control values: [−1, 0, 1] onto [low, center, high].

    Piecewise linear and clipped: an output of 0 is ``center`` (the configured
    value the policy was trained around), −1 is ``low`` and 1 is ``high``;
    without ``center`` it is the middle of the range (plain linear).

    Example:
        >>> controls_from_unit([[-1.0, 0.0, 3.0]], 0.0, 0.5).tolist()
        [[0.0, 0.25, 0.5]]
        >>> controls_from_unit([[-0.5, 0.0, 0.5]], 0.0, 1.0, center=0.25).tolist()
        [[0.125, 0.25, 0.625]]
    """
    unit = np.clip(np.asarray(values, dtype=np.float64), -1.0, 1.0)
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    mid = (low + high) / 2.0 if center is None else np.asarray(center, np.float64)
    side = np.where(unit < 0.0, mid - low, high - mid)
    return (mid + unit * side).astype(np.float32)  # type: ignore[no-any-return]  # numpy stubs: Any


def select_top_k(
    scores: npt.ArrayLike, eligible: npt.ArrayLike, k: int, *, positive: bool = False
) -> npt.NDArray[np.int64]:
    """Return the ids of the (at most) ``k`` eligible clients with the best scores.

    Args:
        scores: (N,) scores; NaN counts as the lowest score.
        eligible: (N,) bool mask of clients that may upload.
        k: Number of subchannels K.
        positive: Only clients with a score > 0 (so the policy also decides
            how many: D2D neighbour selection).

    Returns:
        Client ids by decreasing score, ties to the lower id, length
        min(k, #eligible) (with ``positive``: at most that).

    Example:
        >>> select_top_k([0.1, 0.9, 0.9, 0.5], [True, True, True, False], 2).tolist()
        [1, 2]
        >>> select_top_k([-0.1, 0.9, -2.0], [True] * 3, 2, positive=True).tolist()
        [1]
    """
    values = np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=-np.inf)
    mask = np.asarray(eligible, dtype=bool)
    if positive:
        mask = mask & (values > 0)
    candidates = np.flatnonzero(mask)
    order = candidates[np.lexsort((candidates, -values[candidates]))]
    return order[:k].astype(np.int64)


class ScoreNetwork:
    """The exported score MLP (numpy): features (N, F) → scores (N,).

    Args:
        arrays: The ``pi_w*``/``pi_b*`` arrays of ``policy.npz`` (others ignored).
        features: The feature columns it takes (``policies.features``).

    Raises:
        ValueError: If the arrays do not form a chain of layers taking
            ``features``.
    """

    def __init__(
        self,
        arrays: dict[str, npt.NDArray[np.float32]],
        features: Sequence[str] = FEATURE_NAMES,
    ) -> None:
        self.features = tuple(features)
        hidden = sorted(
            int(k[4:]) for k in arrays if k.startswith("pi_w") and k[4:].isdigit()
        )
        if hidden != list(range(len(hidden))) or "pi_w_out" not in arrays:
            raise ValueError(
                f"policy arrays must be pi_w0..pi_wL, pi_b0..pi_bL, pi_w_out, "
                f"pi_b_out; got {sorted(arrays)}"
            )
        names = [*(str(i) for i in hidden), "_out"]
        self.layers = [
            (
                np.asarray(arrays[f"pi_w{i}"], np.float64),
                np.asarray(arrays[f"pi_b{i}"], np.float64),
            )
            for i in names
        ]
        for (w, _), (w_next, _) in zip(self.layers, self.layers[1:], strict=False):
            if w.shape[1] != w_next.shape[0]:
                raise ValueError(
                    f"layer shapes do not chain: {w.shape}, {w_next.shape}"
                )
        if self.layers[0][0].shape[0] != len(self.features):
            raise ValueError(
                f"first layer takes {self.layers[0][0].shape[0]} features, "
                f"the policy's feature list has {len(self.features)}"
            )

    @property
    def num_outputs(self) -> int:
        """Values per client: 1 (the score), plus one per learned control."""
        return int(self.layers[-1][0].shape[1])

    def outputs(self, features: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Return the (N, 1 + C) outputs: column 0 the score, then the controls."""
        h = np.asarray(features, dtype=np.float64)
        for w, b in self.layers[:-1]:
            h = np.tanh(h @ w + b)
        w, b = self.layers[-1]
        return (h @ w + b).reshape(len(h), -1)

    def __call__(self, features: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Return the (N,) scores of a (N, F) feature matrix."""
        return self.outputs(features)[:, 0]


def resolve_checkpoint(path: str | Path | None) -> Path:
    """Return the ``policy.npz`` of a run directory, a ``policy/`` dir or a file.

    Raises:
        FileNotFoundError: Naming the paths that were tried.
    """
    base = DEFAULT_CHECKPOINT if path is None else Path(path).expanduser()
    tried = [base, base / "policy.npz", base / "policy" / "policy.npz"]
    for candidate in tried:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        "scheduler.params.checkpoint: no exported policy found; tried "
        + ", ".join(str(p) for p in tried)
        + " (train one with `rayfl train-policy CONFIG`)"
    )


def load_checkpoint(path: str | Path | None) -> tuple[ScoreNetwork, dict[str, Any]]:
    """Load an exported policy: its network and its ``policy.json`` metadata.

    Raises:
        FileNotFoundError: If no ``policy.npz`` is found.
        ValueError: If the file is not a ``rayfl-score-mlp`` of a known version.
    """
    npz = resolve_checkpoint(path)
    meta_path = npz.with_name("policy.json")
    meta: dict[str, Any] = (
        json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    )
    if meta.get("format", FORMAT) != FORMAT or meta.get("version", 1) > FORMAT_VERSION:
        raise ValueError(
            f"{npz}: format {meta.get('format')!r} v{meta.get('version')} is not "
            f"{FORMAT!r} v<={FORMAT_VERSION}"
        )
    features = tuple(meta.get("features", FEATURE_NAMES))
    try:
        check_feature_names(features)
    except ValueError as err:
        raise ValueError(f"{npz}: trained on other features: {err}") from None
    with np.load(npz) as data:
        arrays = {k: data[k] for k in data.files}
    return ScoreNetwork(arrays, features), meta


def initial_arrays(
    hidden: list[int] | tuple[int, ...],
    *,
    outputs: int = 1,
    seed: int = 0,
    features: int = len(FEATURE_NAMES),
) -> dict[str, npt.NDArray[np.float32]]:
    """Return the ``pi_*`` arrays of a freshly initialised score network.

    The initialisation of :class:`rayfl.rl.module.ScoreRLModule` (detail 7):
    hidden layers W, b ~ U(−1/√fan_in, 1/√fan_in) (PyTorch's ``nn.Linear``),
    score head W ~ N(0, 0.01²), b = 0.

    Args:
        hidden: Hidden widths, e.g. ``[64, 64]``.
        outputs: 1 + C columns of the head (the score, then C controls).
        seed: Seed of the draw.
        features: F, the width of the input (``policies.features``).

    Example:
        >>> arrays = initial_arrays([4], seed=0)
        >>> sorted(arrays), arrays["pi_w0"].shape, float(arrays["pi_b_out"][0])
        (['pi_b0', 'pi_b_out', 'pi_w0', 'pi_w_out'], (12, 4), 0.0)
    """
    rng = np.random.default_rng(seed)
    sizes = [int(features), *map(int, hidden)]
    arrays: dict[str, npt.NDArray[np.float32]] = {}
    for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:], strict=False)):
        bound = 1.0 / np.sqrt(fan_in)
        arrays[f"pi_w{i}"] = rng.uniform(-bound, bound, (fan_in, fan_out)).astype(
            np.float32
        )
        arrays[f"pi_b{i}"] = rng.uniform(-bound, bound, fan_out).astype(np.float32)
    arrays["pi_w_out"] = (0.01 * rng.standard_normal((sizes[-1], outputs))).astype(
        np.float32
    )
    arrays["pi_b_out"] = np.zeros(outputs, np.float32)
    return arrays


def check_trained(checkpoint: str | Path | None) -> None:
    """Raise ``ValueError`` if the exported policy sampled 0 env steps (detail 6).

    Example:
        >>> check_trained(None)  # the shipped policy: trained
    """
    npz = resolve_checkpoint(checkpoint)
    meta_path = npz.with_name("policy.json")
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    refusal = _untrained_refusal(meta, npz)
    if refusal:
        raise ValueError(refusal)


def _untrained_refusal(meta: dict[str, Any], checkpoint: Path) -> str | None:
    """The reason to refuse a checkpoint trained on 0 env steps, else None."""
    steps = meta.get("env_steps")
    if steps is None or int(steps) > 0:
        return None
    return (
        f"scheduler.params.checkpoint: {checkpoint.parent} was trained on 0 env "
        f"steps ({meta.get('iterations', '?')} PPO iterations sampled nothing): "
        "it is an untrained network; pass allow_untrained=true "
        "(learned:allow_untrained=true) to evaluate it anyway"
    )


class LearnedPolicy(Policy):
    """Schedule the top-K clients by a learned score (FAVOR-style top-K, PPO).

    Args:
        observation_space: The env's Dict observation space.
        action_space: The env's action space.
        checkpoint: A ``rayfl train-policy`` run directory, its ``policy/``
            folder or a ``policy.npz``; None = the shipped default policy.
        selection: ``top_k`` (the K best-scored eligible clients) or
            ``positive`` (those among them with a score > 0, so the number is
            the policy's too: how D2D policies are trained); None = the
            checkpoint's ``selection`` (default top_k).
        allow_untrained: Load a checkpoint that sampled 0 env steps (detail 6).
        untrained: Ignore ``checkpoint``: a freshly initialised network
            (detail 7), the "untrained network + learned decoder" baseline.
        init_seed: Seed of that network's initialisation.
        hidden: That network's hidden widths (``rl.hidden``'s default).

    Example:
        >>> from gymnasium import spaces
        >>> keys = ("loss", "upload_count", "privacy_spent", "staleness",
        ...         "data_size", "eligible")
        >>> obs_space = spaces.Dict({
        ...     "channel_gain": spaces.Box(-np.inf, np.inf, (4, 2)),
        ...     "round": spaces.Box(0, np.inf, (1,)),
        ...     **{k: spaces.Box(0, np.inf, (4,)) for k in keys}})
        >>> policy = LearnedPolicy(obs_space, spaces.MultiDiscrete([5, 5]))
        >>> obs = {k: v for k, v in obs_space.sample().items()}
        >>> obs["eligible"] = np.array([1, 0, 1, 0], np.float32)
        >>> sorted(policy(obs).tolist())
        [0, 2]
    """

    optional_parts: ClassVar[frozenset[str]] = frozenset({"power", "controls"})

    #: Every core key of :mod:`rayfl.observation`; a missing ``round`` counts as 0.
    required_keys = tuple(key for key in CORE_KEYS if key != "round")

    def __init__(
        self,
        observation_space: Any,
        action_space: Any,
        checkpoint: str | Path | None = None,
        *,
        selection: str | None = None,
        allow_untrained: bool = False,
        untrained: bool = False,
        init_seed: int = 0,
        hidden: list[int] | None = None,
        context: Any = None,
    ) -> None:
        if untrained:  # it sees what the env shows (a moving world's columns too)
            names = feature_names(getattr(observation_space, "spaces", {}))
            arrays = initial_arrays(
                hidden or [64, 64], seed=init_seed, features=len(names)
            )
            self.network = ScoreNetwork(arrays, names)
            self.meta: dict[str, Any] = {"env_steps": 0}
            self.checkpoint: Path | None = None
        else:
            self.network, self.meta = load_checkpoint(checkpoint)
            self.checkpoint = resolve_checkpoint(checkpoint)
            refusal = _untrained_refusal(self.meta, self.checkpoint)
            if refusal and not allow_untrained:
                raise ValueError(refusal)
        selection = selection or self.meta.get("selection", "top_k")
        if selection not in ("top_k", "positive"):
            raise ValueError(f"selection must be top_k or positive, got {selection!r}")
        self.selection = selection
        self.allows_idle = selection == "positive"  # the policy picks how many
        super().__init__(observation_space, action_space, context=context)
        self.control_box = _controls_box(action_space)
        learned = self.network.num_outputs - 1
        if self.control_box is not None and learned:
            names = self.meta.get("controls", [])
            if self.control_box.shape != (self.num_clients, learned):
                raise ValueError(
                    f"scheduler.params.checkpoint: the policy sets {learned} "
                    f"per-client controls {names}, the run exposes "
                    f"{self.control_box.shape[1]} (the algorithm's controls)"
                )
        self._outputs: npt.NDArray[np.float64] | None = None

    def outputs(self, obs: Observation) -> npt.NDArray[np.float64]:
        """Return the network's (N, 1 + C) outputs for the clients of ``obs``."""
        features = dict(obs)
        features.setdefault("round", np.zeros(1, np.float32))
        return self.network.outputs(client_features(features, self.network.features))

    def scores(self, obs: Observation) -> npt.NDArray[np.float64]:
        """Return the (N,) scores the network gives the clients of ``obs``."""
        return self.outputs(obs)[:, 0]

    def schedule(self, obs: Observation) -> npt.NDArray[np.int64]:
        """Take the K best-scored eligible clients, then match subchannels."""
        self._outputs = self.outputs(obs)
        chosen = select_top_k(
            self._outputs[:, 0],
            self.eligible_mask(obs),
            self.num_subchannels,
            positive=self.selection == "positive",
        )
        return self.assign_subchannels(self.field(obs, "channel_gain"), chosen)

    def to_action(self, assignment: npt.ArrayLike) -> Action:
        """Add the learned controls when the run exposes them and the policy has any.

        A policy trained without controls leaves them out: the algorithm's
        configured values apply.
        """
        action = super().to_action(assignment)
        box = self.control_box
        if box is None or self._outputs is None or self._outputs.shape[1] == 1:
            return action
        assert isinstance(action, dict)  # a control box implies a Dict action space
        action["controls"] = controls_from_unit(
            self._outputs[:, 1:], box.low, box.high, self.meta.get("control_centers")
        )
        return action


def _controls_box(space: Any) -> Any:
    """The ``controls`` Box of a Dict action space, or None."""
    if isinstance(space, gym_spaces.Dict) and "controls" in space.spaces:
        return space["controls"]
    return None
