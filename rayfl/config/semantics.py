"""Cross-section rules of a run config that the runtime would otherwise break.

Each rule here is something that used to be accepted at validation and then
either failed after Ray started or ran differently from what was asked (issue
45): a value the runtime capped, or a combination the uplink's set-up refuses
(a topology's own rules, e.g. a field it does not read, are its plug-in's
``check_run``). They run in
:class:`rayfl.config.RunConfig`'s cross-section validator, so each is a one-line
:class:`rayfl.config.ConfigError` naming the field, before Ray starts.

The rule behind them: a value the user set is applied as given or refused,
never replaced or dropped without a word.
"""

from __future__ import annotations

from typing import Any

from rayfl.text_checks import check_text

__all__ = ["check_semantics"]


def check_semantics(cfg: Any) -> None:
    """Apply every rule of this module to a validated ``RunConfig``.

    Raises:
        ValueError: On the first rule broken, one line naming the field(s).
    """
    check_text("name", cfg.name)
    _check_eval_clients(cfg)
    _check_quantizer(cfg)
    _check_calibration(cfg)


def _check_eval_clients(cfg: Any) -> None:
    """``eval_clients`` samples at most every client.

    A topology that does not read it refuses it in its plug-in's ``check_run``.
    """
    n = cfg.data.num_clients
    if cfg.eval_clients is not None and cfg.eval_clients > n:
        raise ValueError(
            f"eval_clients must be <= data.num_clients ({n}), got "
            f"{cfg.eval_clients} (null evaluates every client)"
        )


def _check_quantizer(cfg: Any) -> None:
    """``compression.quantize_range: clip`` quantizes in ±(C + 3σ): it needs C."""
    compression = cfg.compression
    if (
        compression.quantize_bits is not None
        and compression.quantize_range == "clip"
        and cfg.privacy.clip_norm is None
    ):
        raise ValueError(
            "compression.quantize_bits with quantize_range=clip (the default) "
            "quantizes in ±(C + 3σ) and needs privacy.clip_norm: set "
            "privacy.clip_norm=C or compression.quantize_range=minmax"
        )


def _check_calibration(cfg: Any) -> None:
    """What the uplink's noise calibration (``rayfl.uplink``) needs from the config.

    A WPFL DP baseline calibrates its own noise (``algorithm.dp_mechanism``);
    otherwise ``privacy.calibration: wpfl`` (Theorem 1 of the WPFL paper) needs
    the quantizer's R.
    """
    privacy = cfg.privacy
    if privacy.placement == "edge":  # the hierarchy has its own DP (topology.dp)
        raise ValueError(
            "privacy.placement=edge needs edge servers adding the noise: "
            f"topology.kind={cfg.topology.kind} has none here (the hierarchy's "
            "edges use topology.dp); use client or cloud"
        )
    mechanism = getattr(cfg.algorithm, "dp_mechanism", None)
    if mechanism is not None:
        from rayfl.algorithms.wpfl_sections import check_mechanism_sections

        check_mechanism_sections(cfg)
        if mechanism != "proposed":
            return
    formula = (
        privacy.mechanism != "none"
        and privacy.noise_std is None
        and privacy.noise_multiplier is None
        and privacy.epsilon is not None
    )
    if formula and privacy.calibration == "wpfl" and not cfg.compression.quantize_bits:
        raise ValueError(
            "privacy.calibration=wpfl (Theorem 1 of the WPFL paper) needs the "
            "quantizer's R: set compression.quantize_bits, or another "
            "privacy.calibration"
        )
