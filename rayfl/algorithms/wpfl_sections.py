"""The sections a WPFL DP baseline (``algorithm.dp_mechanism``) needs from the run.

The WPFL paper's (arXiv:2506.02422) DP baselines calibrate their own noise
(:meth:`rayfl.algorithms.wpfl.Wpfl.calibrate_noise`); what they need from the
privacy, compression and wireless sections depends on the config alone, so
:func:`check_mechanism_sections` is called both there and at validation
(:mod:`rayfl.config.semantics`), before Ray starts. No numpy, no torch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_mechanism_sections"]


def check_mechanism_sections(config: Any) -> None:
    """Raise unless ``config`` can carry its ``algorithm.dp_mechanism``.

    Args:
        config: The run's sections (algorithm, privacy, compression, wireless),
            with a WPFL algorithm.

    Raises:
        ValueError: Naming the fields to set, one line.
    """
    algo, privacy = config.algorithm, config.privacy
    mech = algo.dp_mechanism
    if mech in ("proposed", "none"):
        return
    if mech == "perfect_gaussian" and (
        config.compression.quantize_bits is not None
        or algo.downlink_bits is not None
        or (config.wireless is not None and config.wireless.effects != "none")
    ):
        raise ValueError(
            "algorithm.dp_mechanism=perfect_gaussian means no quantization and "
            "no channel errors: set compression.quantize_bits=null, "
            "algorithm.downlink_bits=null and wireless.effects=none"
        )
    if mech == "dithering":
        _check_dithering(config)
    if privacy.clip_norm is None or privacy.max_uploads is None:
        raise ValueError(
            f"algorithm.dp_mechanism={mech} needs privacy.clip_norm and "
            "privacy.max_uploads (T0)"
        )
    if privacy.mechanism == "none":
        raise ValueError(
            f"algorithm.dp_mechanism={mech} needs privacy.mechanism=gaussian "
            "(the noise stage); got none"
        )


def _check_dithering(config: Any) -> None:
    """Raise ValueError unless the run's sections can carry the Dithering baseline."""
    privacy, compression = config.privacy, config.compression
    problems = []
    if compression.quantize_bits is not None:
        problems.append(
            "compression.quantize_bits=null (the dithered quantizer replaces the "
            "R-bit uplink quantizer)"
        )
    if compression.sparsify_fraction < 1.0:
        problems.append("compression.sparsify_fraction=1 (dense uploads)")
    if privacy.clip_norm is None or privacy.max_uploads is None:
        problems.append("privacy.clip_norm and privacy.max_uploads (T0)")
    if privacy.epsilon is None:
        problems.append("a finite privacy.epsilon (b = Δs·T0/ε)")
    if privacy.placement != "client":
        problems.append("privacy.placement=client (the client dithers)")
    if privacy.mechanism == "none":
        problems.append("privacy.mechanism other than none (DP on)")
    if problems:
        raise ValueError(
            "algorithm.dp_mechanism=dithering needs " + "; ".join(problems)
        )
