"""The uplink as an ordered chain of stages, and the server-side noise wrapper.

Every stage has one interface (STYLE rule 8): ``stage(x, rng) -> (x, metrics)``
where x is a float32 vector of shape (d,) or a ``Payload`` and metrics is a
``dict[str, float]``. The client chain, in order:

1. clip: L2 clipping to C (``rayfl.privacy.clip``);
2. noise: i.i.d. Gaussian N(0, σ²), only when the noise is placed on the client;
3. sparsify: random Bernoulli(p) mask (1/p rescale) or top-k;
4. quantize: R-bit uniform quantizer over ±(C + 3σ) or [min, max].

Server side, in order: channel errors (``wireless``) → aggregate → server noise
(``add_server_noise`` / ``ServerNoise``, for placement "edge" or "cloud").

Symbol table:

| paper symbol | code name | meaning |
|---|---|---|
| C | ``clip_norm`` | L2 clip threshold |
| σ_DP | ``noise_std`` | per-coordinate noise std |
| s, p | ``keep_fraction`` | kept fraction |
| R | ``bits`` | quantization bits |

Implementation details:

1. The DP mechanism is two stages (clip, noise) so the noise can move to the edge
   or the cloud (hierarchical DP, seed 004) while clipping stays on the client.
2. Clipping runs whenever ``privacy.clip_norm`` is set, even with no noise
   (seed 001 §2.4 item 6 keeps clipping on at ε = ∞).
3. With ``quantize_range="clip"`` the range is ±(C + 3σ) with σ the client-side
   noise std (seed 000 eq. 6); with server-side noise it is ±C.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Union

import numpy as np
import numpy.typing as npt

from rayfl.compression.config import CompressionConfig
from rayfl.compression.payload import Payload
from rayfl.compression.quantize import minmax_range, quantize, uplink_range
from rayfl.compression.sparsify import random_sparsify, topk_sparsify
from rayfl.privacy.clip import clip_by_l2_norm
from rayfl.privacy.config import PrivacyConfig
from rayfl.privacy.gaussian import add_gaussian_noise

StageInput = Union[npt.NDArray[np.float32], Payload]  # noqa: UP007
Stage = Callable[[StageInput, np.random.Generator], tuple[StageInput, dict[str, float]]]


def _dense(x: StageInput, stage: str) -> npt.NDArray[np.float32]:
    if isinstance(x, Payload):
        raise TypeError(
            f"the {stage} stage needs a dense vector; put it before sparsify/quantize"
        )
    return np.asarray(x, dtype=np.float32)


@dataclass(frozen=True)
class ClipStage:
    """Clip to L2 norm ≤ C (whole vector, or per layer with ``offsets``)."""

    clip_norm: float
    offsets: tuple[int, ...] | None = None

    def __call__(
        self, x: StageInput, rng: np.random.Generator
    ) -> tuple[StageInput, dict[str, float]]:
        """Clip ``x``; metrics: ``update_norm`` before, ``clip_scale`` applied."""
        clipped, norm = clip_by_l2_norm(
            _dense(x, "clip"), clip_norm=self.clip_norm, offsets=self.offsets
        )
        after = float(np.linalg.norm(clipped.astype(np.float64)))
        scale = after / norm if norm > 0 else 1.0
        return clipped, {"update_norm": norm, "clip_scale": scale}


@dataclass(frozen=True)
class NoiseStage:
    """Add i.i.d. N(0, σ²) to every coordinate."""

    noise_std: float

    def __call__(
        self, x: StageInput, rng: np.random.Generator
    ) -> tuple[StageInput, dict[str, float]]:
        """Add noise; metrics: ``noise_std``."""
        noisy = add_gaussian_noise(
            _dense(x, "noise"), noise_std=self.noise_std, rng=rng
        )
        return noisy, {"noise_std": self.noise_std}


@dataclass(frozen=True)
class SparsifyStage:
    """Random Bernoulli(p) sparsification (optionally rescaled) or top-k."""

    keep_fraction: float
    topk: bool = False
    rescale: bool = True

    def __call__(
        self, x: StageInput, rng: np.random.Generator
    ) -> tuple[StageInput, dict[str, float]]:
        """Sparsify; metrics: ``kept_fraction`` realised."""
        vector = _dense(x, "sparsify")
        if self.topk:
            payload = topk_sparsify(vector, keep_fraction=self.keep_fraction)
        else:
            payload = random_sparsify(
                vector, keep_fraction=self.keep_fraction, rng=rng, rescale=self.rescale
            )
        kept = payload.values.shape[0] / max(payload.dim, 1)
        return payload, {"kept_fraction": float(kept)}


@dataclass(frozen=True)
class QuantizeStage:
    """R-bit quantization over a fixed range (lo, hi) or the values' [min, max]."""

    bits: int
    stochastic: bool = False
    value_range: tuple[float, float] | None = None

    def __call__(
        self, x: StageInput, rng: np.random.Generator
    ) -> tuple[StageInput, dict[str, float]]:
        """Quantize; metrics: ``quantize_lo``, ``quantize_hi``."""
        values = x.values if isinstance(x, Payload) else np.asarray(x, np.float32)
        lo, hi = self.value_range or minmax_range(values)
        payload = quantize(
            x, lo=lo, hi=hi, bits=self.bits, rng=rng if self.stochastic else None
        )
        return payload, {"quantize_lo": lo, "quantize_hi": hi}


def build_client_stages(
    privacy: PrivacyConfig,
    compression: CompressionConfig,
    *,
    noise_std: float,
    layer_offsets: Sequence[int] | None = None,
) -> list[Stage]:
    """Build the client's stage chain clip → noise → sparsify → quantize.

    Args:
        privacy: Privacy config; clipping runs when ``clip_norm`` is set, the
            noise stage only when ``mechanism != "none"``, ``placement ==
            "client"`` and σ > 0.
        compression: Compression config.
        noise_std: σ, per-coordinate std (from ``calibrate_noise_std``).
        layer_offsets: The model's layer boundaries; used for per-layer
            clipping only when ``privacy.clip_per_layer`` is true.

    Returns:
        The ordered list of stages (possibly empty).

    Raises:
        ValueError: If ``quantize_range="clip"`` is used without a clip norm.

    Example:
        >>> from rayfl.compression.config import CompressionConfig
        >>> stages = build_client_stages(PrivacyConfig(), CompressionConfig(),
        ...                              noise_std=0.0)
        >>> stages
        []
    """
    stages: list[Stage] = []
    if privacy.clip_norm is not None:
        offsets = (
            tuple(int(o) for o in layer_offsets)
            if privacy.clip_per_layer and layer_offsets is not None
            else None
        )
        stages.append(ClipStage(privacy.clip_norm, offsets))
    client_std = 0.0
    if privacy.mechanism != "none" and privacy.placement == "client" and noise_std > 0:
        client_std = float(noise_std)
        stages.append(NoiseStage(client_std))
    if compression.sparsify_fraction < 1.0:
        stages.append(
            SparsifyStage(
                compression.sparsify_fraction,
                topk=compression.topk,
                rescale=compression.sparsify_rescale,
            )
        )
    if compression.quantize_bits is not None:
        value_range: tuple[float, float] | None = None
        if compression.quantize_range == "clip":
            if privacy.clip_norm is None:
                raise ValueError(
                    "compression.quantize_range='clip' needs privacy.clip_norm, got "
                    "None (use quantize_range='minmax')"
                )
            value_range = uplink_range(
                clip_norm=privacy.clip_norm, noise_std=client_std
            )
        stages.append(
            QuantizeStage(
                compression.quantize_bits, compression.stochastic, value_range
            )
        )
    return stages


def run_stages(
    vector: npt.ArrayLike | Payload, stages: Sequence[Stage], rng: np.random.Generator
) -> tuple[Payload, dict[str, float]]:
    """Run the stages in order and return the uplink payload and merged metrics.

    Args:
        vector: Model vector, shape (d,), float, or an already sparse
            ``Payload`` (then only stages that accept payloads may follow).
        stages: Ordered stages (``build_client_stages``).
        rng: Generator shared by the stages, keyed (seed, purpose, round, client).

    Returns:
        (payload, metrics): a ``Payload`` (a dense one wraps a plain vector) and
        the stages' metrics plus ``payload_bits``. A non-finite input (a diverged
        model) skips the stages and gives an all-NaN dense payload with
        ``non_finite_upload = 1`` in the metrics, which the server rejects.

    Example:
        >>> import numpy as np
        >>> payload, metrics = run_stages([1.0, 2.0], [], np.random.default_rng(0))
        >>> metrics["payload_bits"]
        64.0
    """
    x: StageInput = (
        vector
        if isinstance(vector, Payload)
        else np.asarray(vector, dtype=np.float32).reshape(-1)
    )
    values = x.values if isinstance(x, Payload) else x
    if stages and not np.all(np.isfinite(values)):
        # A diverged model: clipping cannot bound it and the quantizer would map
        # NaN to a finite level (garbage the server could not tell from a real
        # update). Send an all-NaN vector instead: it carries nothing about the
        # data, and the server rejects non-finite uploads.
        dim = x.dim if isinstance(x, Payload) else len(x)
        payload = Payload.dense(np.full(dim, np.nan, dtype=np.float32))
        return payload, {
            "non_finite_upload": 1.0,
            "payload_bits": float(payload.payload_bits),
        }
    metrics: dict[str, float] = {}
    for stage in stages:
        x, stage_metrics = stage(x, rng)
        metrics.update(stage_metrics)
    payload = x if isinstance(x, Payload) else Payload.dense(x)
    metrics["payload_bits"] = float(payload.payload_bits)
    return payload, metrics


def add_server_noise(
    aggregate_vector: npt.ArrayLike, *, noise_std: float, rng: np.random.Generator
) -> npt.NDArray[np.float32]:
    """Add N(0, σ²) to an aggregate at the edge or cloud (seed 004 eq. 11-14).

    Args:
        aggregate_vector: Aggregated model or update, shape (d,), float.
        noise_std: σ of the server stream (e.g. σ̄_{c,Loc} of a trusted edge).
        rng: Generator keyed (seed, "server_noise", round, server).

    Returns:
        Noisy float32 aggregate, shape (d,).

    Example:
        >>> import numpy as np
        >>> add_server_noise([1.0], noise_std=0.0, rng=np.random.default_rng(0))
        array([1.], dtype=float32)
    """
    return add_gaussian_noise(aggregate_vector, noise_std=noise_std, rng=rng)


class ServerNoise:
    """Wrap an aggregation function so its output gets server-side noise.

    Extends by wrapping, not forking (STYLE rule 9): ``ServerNoise(mean_fn,
    noise_std=σ)(updates, rng=rng)`` returns ``mean_fn(updates) + N(0, σ²)``.

    Args:
        aggregate_fn: Callable returning an aggregate vector, shape (d,).
        noise_std: σ ≥ 0 of the server stream.
    """

    def __init__(self, aggregate_fn: Callable[..., npt.ArrayLike], *, noise_std: float):
        if not noise_std >= 0:
            raise ValueError(f"noise_std must be >= 0, got {noise_std}")
        self.aggregate_fn = aggregate_fn
        self.noise_std = float(noise_std)

    def __call__(
        self, *args: Any, rng: np.random.Generator, **kwargs: Any
    ) -> npt.NDArray[np.float32]:
        """Aggregate, then add noise drawn from ``rng``."""
        aggregate = self.aggregate_fn(*args, **kwargs)
        return add_server_noise(aggregate, noise_std=self.noise_std, rng=rng)
