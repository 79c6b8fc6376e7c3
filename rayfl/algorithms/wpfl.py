"""WPFL: Ditto over a quantized, noisy OFDMA channel with the quantization-assisted DP.

Zhao et al. 2025, "Enhancing Convergence, Privacy and Fairness for Wireless
Personalized Federated Learning: Quantization-Assisted Min-Max Fair Scheduling"
(spec seed_000). Algorithm 1, round t, as the engine runs it:

1. every client n receives the broadcast ω̂_{n,G}^t: the server's R-bit global
   model Q_G(ω̃_L) over ±C with its own downlink bit errors (eq. 7, 18;
   :mod:`rayfl.wireless.downlink`);
2. each scheduled client trains its FL local model from it,
   u_n = ω̂_{n,G}^t − η_F ∇F_n(ω̂_{n,G}^t) (eq. 20a), and uploads it through the
   engine's uplink: whole-model L2 clip to C (eq. 2) → N(0, σ_DP²) (σ_DP from
   Theorem 1 / Table II) → R-bit quantization over ±(C + 3σ_DP) (eq. 6-8) →
   bit flips at its subchannel's 256-QAM BER (eq. 13-15);
3. every client (``personal_all_clients``, [AMBIG-5]) updates its PL model,
   ϖ ← ϖ − η_P[(1 − λ/2)∇F_n(ϖ) + λ(ϖ − ω̂_{n,G}^t)] (eq. 20b);
4. the server averages what arrived (eq. 16) and quantizes the mean with Q_G.

A client uploads at most T0 = ``privacy.max_uploads`` times (C7); the run ends
when no client may upload any more, or at ``rounds``.

| paper symbol | code name |
|---|---|
| ω̃_G^t, ω̂_{n,G}^t | server's global vector, ``received`` in ``client_update`` |
| u_n^t, ϖ_n^t | upload ``ClientUpdate.vector``, ``state["personal"]`` |
| η_F, η_P, λ_n | ``lr``, ``personal_lr``, ``lam`` (per-client controls) |
| R (downlink), C | ``downlink_bits``, ``privacy.clip_norm`` |
| e_{n,G} | ``ClientContext.downlink_bit_error_rate`` |
| T0 | ``privacy.max_uploads`` |
| B_q, B_o | record keys ``effective_quantization_bits``, ``effective_overhead_bits`` |
| b (Dithering) | ``dither_laplace_scale`` |

Implementation details:
    1. [AMBIG-5] The PL step of round t uses the broadcast ω̂^t received at the
       start of the round (Alg. 1 as printed, and the FL step's start point); the
       spec's §3.4 order applies it after aggregation (ω̂^{t+1}). The two differ by
       one broadcast of lag in ϖ; the final PL models miss the last aggregate.
    2. [AMBIG-10] ω⁰ reaches everyone error-free and unquantized
       (``first_broadcast``), and ϖ_n^0 = ω⁰.
    3. [AMBIG-4] Local work per round is Ditto's: ``local_mode="paper_gd_step"`` is
       one full-batch step per model; the default ``epochs`` runs ``local_steps``
       (or epochs) of mini-batch SGD with batch ``batch_size`` (q·abs(D_n) in the
       paper), the same η per step.
    4. [AMBIG-9] A selected client whose upload was corrupted is still averaged;
       with nothing delivered, the global model is unchanged.
    5. The downlink BER of round t comes from the round's channel realisation
       (per-client Rayleigh fading at P_BS, [AMBIG-2]); it is zero when
       ``downlink_errors`` is false or ``wireless.effects`` is not ``bit_flip``
       ("error-free" baseline).
    6. ``dp_mechanism`` selects seed 000's baselines (§5.2, [AMBIG-11]); the
       driver's ``UplinkModel`` asks :meth:`Wpfl.calibrate_noise` for their σ.
    7. ``dp_mechanism="dithering"`` (P2CEFL, the spec's reconstruction): σ = 0 and
       no R-bit uplink quantizer; :meth:`Wpfl.encode_upload` dither-quantizes the
       clipped model with Laplace scale b = Δs·T0/ε and the shared
       ``rng_for(seed, "dither", t, n)`` (``rayfl.compression.dithering``). Its
       variable-width indices get the uplink's bit flips; ``dither_index_bits`` is
       their mean width, and B_q/B_o are those of their sign-magnitude form.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from rayfl.algorithms.base import ClientContext, ClientUpdate
from rayfl.algorithms.config import WpflConfig
from rayfl.algorithms.ditto import Ditto
from rayfl.algorithms.wpfl_sections import check_mechanism_sections
from rayfl.compression.dithering import (
    DitheredPayload,
    dither_encode,
    level_offsets,
)
from rayfl.compression.effective_bits import (
    effective_bits,
    effective_bits_of_lengths,
)
from rayfl.compression.payload import Payload
from rayfl.learning.aggregate import PartialSum
from rayfl.privacy.config import PrivacyConfig
from rayfl.seeding import rng_for
from rayfl.wireless.downlink import quantize_global, receive_broadcast

__all__ = ["Wpfl", "WpflConfig"]


class Wpfl(Ditto):
    """WPFL (seed 000 Algorithm 1): Ditto with a quantized, noisy downlink.

    Args:
        config: The ``algorithm`` section (:class:`WpflConfig`).
    """

    uses_downlink: ClassVar[bool] = True
    #: Record keys the runner copies into metrics.parquet (Table III).
    logged_metrics: ClassVar[tuple[str, ...]] = (
        "effective_quantization_bits",
        "effective_overhead_bits",
        "effective_bits_per_parameter",
        "dither_index_bits",
    )

    def __init__(self, config: WpflConfig) -> None:
        super().__init__(config)
        self.updates_unscheduled = config.personal_all_clients
        self.clip_norm: float | None = None
        self.seed = 0
        self.privacy: Any = None
        self._laplace_scale: float | None = None

    def bind(self, *, privacy: PrivacyConfig, seed: int) -> None:
        """Read C (downlink range ±C), the privacy section and the seed."""
        self.clip_norm = privacy.clip_norm
        self.seed = int(seed)
        self.privacy = privacy
        self._laplace_scale = None

    # ---------------------------------------------------------------- downlink
    def received_global(self, ctx: ClientContext) -> npt.NDArray[np.float32]:
        """Return ω̂_{n,G}^t, client n's copy of the broadcast (eq. 18)."""
        cfg: WpflConfig = self.config  # type: ignore[assignment]
        clip = self.clip_norm
        if cfg.downlink_bits is None or clip is None:
            return ctx.global_vector
        if ctx.round == 0 and cfg.first_broadcast == "error_free":
            return ctx.global_vector
        ber = ctx.downlink_bit_error_rate if cfg.downlink_errors else 0.0
        received, wrong = receive_broadcast(
            ctx.global_vector,
            clip_norm=clip,
            bits=cfg.downlink_bits,
            bit_error_rate=ber,
            rng=rng_for(self.seed, "downlink", round=ctx.round, client=ctx.client),
        )
        ctx.state["downlink_errors"] = wrong
        return received

    # ---------------------------------------------------------------- client
    def client_update(self, ctx: ClientContext) -> ClientUpdate:
        """FL step from the received broadcast (uploaded) and the PL step (kept)."""
        received = self.received_global(ctx)
        update = super().client_update(dataclasses.replace(ctx, global_vector=received))
        wrong = float(ctx.state.pop("downlink_errors", 0))
        return dataclasses.replace(
            update, metrics={**update.metrics, "downlink_errors": wrong}
        )

    def personal_update(self, ctx: ClientContext) -> dict[str, float]:
        """PL step (eq. 20b) of an unscheduled client towards its received broadcast."""
        pl = self.personal_step(ctx, self.received_global(ctx))
        return {
            "personal_train_loss": pl.train_loss,
            "personal_steps": float(pl.steps),
            "downlink_errors": float(ctx.state.pop("downlink_errors", 0)),
        }

    def encode_upload(self, payload: Payload, ctx: ClientContext) -> Payload:
        """Dither-quantize the clipped upload (``dp_mechanism="dithering"``).

        Args:
            payload: The uplink stages' output: the dense clipped model (σ = 0, no
                R-bit quantizer, both checked by :meth:`calibrate_noise`).
            ctx: The client's context (round, client id, train-set sizes).

        Returns:
            The :class:`DitheredPayload`, or ``payload`` for other mechanisms and
            for a diverged (non-finite) model, which the server then rejects.
        """
        cfg: WpflConfig = self.config  # type: ignore[assignment]
        if cfg.dp_mechanism != "dithering":
            return payload
        if payload.codes is not None or payload.is_sparse:
            raise ValueError(
                "dp_mechanism=dithering needs the dense, unquantized clipped model"
            )
        vector = payload.to_dense()
        if not np.all(np.isfinite(vector)):
            return payload
        # Saturate at ±C like the R-bit quantizer's end levels: a no-op after an
        # exact clip, a guard when the clip of a diverged model lost precision.
        clip = float(self.clip_norm)  # type: ignore[arg-type]
        vector = np.clip(vector, -clip, clip)
        if self._laplace_scale is None:
            self._laplace_scale = _dither_noise(self.privacy, cfg, ctx.num_train_all)
        return dither_encode(
            vector,
            laplace_scale=self._laplace_scale,
            clip_norm=clip,
            seed=self.seed,
            round=ctx.round,
            client=ctx.client,
        )

    @classmethod
    def quantizes_uploads(cls, config: Any) -> bool:
        """True with Dithering: its indices take bit flips, not a CRC drop."""
        return bool(config.algorithm.dp_mechanism == "dithering")

    def payload_metrics(self, payload: Payload) -> dict[str, float]:
        """Return Table III's B_q, B_o and bits per parameter of a quantized upload.

        For a dithered upload also ``dither_index_bits`` (mean w_i, what is sent),
        ``dither_laplace_scale`` (b) and its honest ``payload_bits`` (Σ w_i).
        """
        if payload.codes is None:
            return {}
        if isinstance(payload, DitheredPayload):
            steps, _ = payload.draws()
            assert payload.hi is not None  # a dithered payload's range is [-C, C]
            index = payload.codes.astype(np.int64) - level_offsets(
                steps, clip_norm=float(payload.hi)
            )
            _, lengths = np.frexp(np.abs(index).astype(np.float64))
            mean_width = payload.payload_bits / payload.dim
            coded = effective_bits_of_lengths(lengths, fallback_bits=mean_width)
            return {
                "effective_quantization_bits": coded.quantization_bits,
                "effective_overhead_bits": coded.overhead_bits,
                "effective_bits_per_parameter": coded.bits_per_parameter,
                "dither_index_bits": mean_width,
                "dither_laplace_scale": payload.laplace_scale,
                "payload_bits": payload.payload_bits,
            }
        bits = effective_bits(payload.codes, bits=payload.bits_per_element)
        return {
            "effective_quantization_bits": bits.quantization_bits,
            "effective_overhead_bits": bits.overhead_bits,
            "effective_bits_per_parameter": bits.bits_per_parameter,
        }

    # ---------------------------------------------------------------- server
    def combine(
        self, global_vector: npt.NDArray[np.float32], summed: PartialSum
    ) -> npt.NDArray[np.float32]:
        """Return Q_G(mean of the received models), eq. 16 then eq. 7."""
        new = super().combine(global_vector, summed)
        cfg: WpflConfig = self.config  # type: ignore[assignment]
        clip = self.clip_norm
        if cfg.downlink_bits is None or clip is None or summed.count == 0:
            return new
        return quantize_global(new, clip_norm=clip, bits=cfg.downlink_bits)

    # ---------------------------------------------------------------- driver
    @classmethod
    def calibrate_noise(
        cls, config: Any, *, num_train: npt.ArrayLike
    ) -> tuple[float, float] | None:
        """Return (σ, Δs) of a baseline mechanism; None for 'proposed'.

        Args:
            config: The run's sections (``rayfl.uplink.UplinkSections``: privacy,
                compression, algorithm, wireless).
            num_train: Train-set size per client (N,).

        Raises:
            ValueError: If the mechanism needs a budget or settings that are missing
                or inconsistent (e.g. Perfect Gaussian with a quantizer).
        """
        algo: WpflConfig = config.algorithm
        mech = algo.dp_mechanism
        if mech == "proposed":
            return None
        if mech == "none":
            return 0.0, float(config.privacy.clip_norm or 0.0)
        check_mechanism_sections(config)
        noise = _mechanism_noise(mech, config.privacy, algo, num_train)
        return noise.noise_std, noise.sensitivity


def _mechanism_noise(mech: str, privacy: Any, cfg: WpflConfig, num_train: Any) -> Any:
    """Return ``wpfl_mechanisms.mechanism_noise`` for the run's privacy settings."""
    from rayfl.privacy.wpfl_mechanisms import mechanism_noise

    return mechanism_noise(
        mech,
        epsilon=privacy.epsilon,
        delta=privacy.delta,
        max_uploads=privacy.max_uploads,
        clip_norm=privacy.clip_norm,
        num_train=num_train,
        sample_rate=privacy.calibration_sample_rate,
        sensitivity=cfg.sensitivity,
        accountant=privacy.accountant,
    )


def _dither_noise(privacy: Any, cfg: WpflConfig, num_train: Any) -> float:
    """Return the Dithering baseline's Laplace scale b for these clients."""
    if num_train is None:
        raise ValueError("dp_mechanism=dithering needs the clients' train sizes")
    return _mechanism_noise("dithering", privacy, cfg, num_train).laplace_scale
