"""The privacy block a run reports: ε per client, the ledger's rule, the note.

:class:`LedgerReport` is the reporting half of :class:`rayfl.uplink.UplinkModel`
(a mixin: it reads the model's ledger and calibration), and :func:`epsilon_note`
explains an accountant ε far above the configured target. See
:mod:`rayfl.uplink` for what the ledger records and why.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.privacy.accountant import PrivacyLedger
from rayfl.privacy.calibration import nominal_epsilon
from rayfl.privacy.participation import LocalDPSGD
from rayfl.privacy.sensitivity import ADJACENCY_CLIENT, laplace_vector_epsilon

__all__ = ["LedgerReport", "epsilon_note"]

#: Calibrations by a paper's formula: they report that formula's nominal ε.
_PAPER_CALIBRATIONS = ("wpfl", "dp_ditto", "h2fdp")


def epsilon_note(
    eps: npt.NDArray[np.float64],
    *,
    target: float | None,
    calibration: str,
    noise_multiplier: float | None,
) -> str | None:
    """Explain an accountant ε far above the configured target, or return None.

    The ledger's ε is dp-accounting's bound at the sensitivity the code
    enforces (``rayfl.privacy.sensitivity``); a paper's calibration (e.g.
    ``wpfl``: the WPFL paper's Theorem 1) can claim a target the ledger does not
    confirm. ``summary.json`` then says so instead of leaving two numbers that
    disagree silently.

    Example:
        >>> epsilon_note(np.array([5e7]), target=1.0, calibration="wpfl",
        ...              noise_multiplier=4.9e-4)[:40]
        'accountant epsilon 5e+07 (at the sensiti'
        >>> epsilon_note(np.array([1.5]), target=1.0, calibration="wpfl",
        ...              noise_multiplier=1.0) is None
        True
    """
    if target is None or not math.isfinite(target) or len(eps) == 0:
        return None
    worst = float(np.max(eps))
    if not worst > 2.0 * target:
        return None
    z = "" if noise_multiplier is None else f", z = {noise_multiplier:.3g}"
    return (
        f"accountant epsilon {worst:.3g} (at the sensitivity the code "
        f"enforces{z}; quantization is post-processing) is "
        f"above epsilon_target {target:g}. The target is the nominal value of "
        f"calibration '{calibration}', the paper's formula, not a guarantee."
    )


class LedgerReport:
    """ε per client, the ledger's rule and the ``summary.json`` privacy block.

    A mixin of :class:`rayfl.uplink.UplinkModel`, which sets the attributes below.

    Attributes:
        sections: The run's sections (``privacy`` is read).
        accounted: Whether the run has a privacy ledger to report.
        ledger: The per-client privacy ledger.
        local_dp: Local DP-SGD accounting (``sparse_dp``), or None.
        laplace_scale: The Dithering baseline's Laplace scale b (0: Gaussian).
        model_dim: Model size d, or None.
        planned_uploads: Planned releases per client (T0 or T).
        sensitivity: The ledger's L2 sensitivity 2C.
        noise_multiplier: z = σ/(2C).
        client_noise_multiplier: z per client, or None.
        noise_std: σ added on the clients.
        server_noise_std: σ added by the server (central DP).
        client_noise_std: σ per client, or None.
    """

    sections: Any
    accounted: bool
    ledger: PrivacyLedger
    local_dp: LocalDPSGD | None
    laplace_scale: float
    model_dim: int | None
    planned_uploads: int
    sensitivity: float
    noise_multiplier: float
    client_noise_multiplier: npt.NDArray[np.float64] | None
    noise_std: float
    server_noise_std: float
    client_noise_std: npt.NDArray[np.float64] | None

    def epsilons(
        self, *, evaluate: bool
    ) -> tuple[npt.NDArray[np.float64] | None, npt.NDArray[np.float64] | None]:
        """Return (accountant ε, the paper formula's ε) per client, or (None, None).

        The second is the ε a paper's calibration claims for the releases so
        far (the accountant's own for 'accountant'/'sparse'); it is reported
        once, as ``paper_epsilon_per_client`` in ``summary.json``, never beside
        the spent ε in ``metrics.parquet``.

        Args:
            evaluate: Compute now (False returns (None, None) to save time).
        """
        privacy = self.sections.privacy
        if not self.accounted or not evaluate:
            return None, None
        if self.local_dp is not None:  # same ε as the ledger's, composed fast
            eps = self.local_dp.epsilon(self.ledger.upload_count)
        elif self.laplace_scale > 0:  # Dithering: pure ε of the Laplace vector
            eps = laplace_vector_epsilon(
                self.ledger.upload_count,
                clip_norm=float(privacy.clip_norm or 0.0),
                dim=int(self.model_dim or 0),
                laplace_scale=self.laplace_scale,
            )
            if not self.model_dim:
                eps = np.where(self.ledger.upload_count > 0, np.inf, 0.0)
        else:
            eps = self.ledger.epsilon(privacy.delta)
        nominal = eps  # "accountant"/"sparse": the calibration *is* the accountant's
        if privacy.epsilon is not None and privacy.calibration in _PAPER_CALIBRATIONS:
            nominal = nominal_epsilon(
                self.ledger.upload_count,
                calibration=privacy.calibration,
                epsilon=privacy.epsilon,
                planned_uploads=self.planned_uploads,
            )
        return eps, nominal

    def ledger_rule(self) -> dict[str, Any]:
        """Return the sensitivity, the ledger's adjacency, its q and z(s).

        ``ledger_adjacency`` is the relation the ledger's analysis assumes for
        the noised release alone; the run's ``adjacency`` (what it really holds
        for) is :func:`rayfl.privacy.sensitivity.adjacency`'s.
        """
        privacy = self.sections.privacy
        if self.local_dp is not None:
            q = np.asarray(self.local_dp.sample_rate, dtype=np.float64)
            return {
                "sensitivity": self.local_dp.sensitivity,
                "ledger_adjacency": self.local_dp.adjacency,
                "ledger_sample_rate": (
                    float(q[0]) if np.all(q == q[0]) else q.tolist()
                ),
                "noise_multiplier": self.local_dp.noise_multiplier,
            }
        clip = privacy.clip_norm
        if self.laplace_scale > 0:
            return {
                "sensitivity": f"L1 2C*sqrt(d) = {2 * float(clip or 0):g}*sqrt("
                f"{self.model_dim}) (Laplace({self.laplace_scale:.4g}) per "
                "coordinate, pure epsilon by basic composition)",
                "ledger_adjacency": ADJACENCY_CLIENT,
                "ledger_sample_rate": 1.0,
                "laplace_scale": self.laplace_scale,
            }
        rule: dict[str, Any] = {
            "sensitivity": f"2C = {self.sensitivity:g} (whole update clipped to C)"
            + (
                "; central noise sigma*max w/sum w on the weighted mean"
                if privacy.placement == "cloud"
                else ""
            ),
            "ledger_adjacency": ADJACENCY_CLIENT,
            "ledger_sample_rate": 1.0,
            "noise_multiplier": self.noise_multiplier,
        }
        if self.client_noise_multiplier is not None:
            rule["noise_multiplier_per_client"] = self.client_noise_multiplier.tolist()
            rule["noise_multiplier"] = float(np.max(self.client_noise_multiplier))
        return rule

    def _paper_epsilon(self, paper: bool) -> dict[str, Any]:
        """Return the paper formula's ε per client (summary.json only), or {}."""
        if not paper or self.sections.privacy.epsilon is None:
            return {}
        _, claimed = self.epsilons(evaluate=True)
        if claimed is None:
            return {}
        return {"paper_epsilon_per_client": [float(e) for e in claimed]}

    def privacy_summary(self, eps: npt.NDArray[np.float64] | None) -> dict[str, Any]:
        """Return the privacy block of ``summary.json``."""
        privacy = self.sections.privacy
        if not self.accounted or eps is None:
            return {"mechanism": privacy.mechanism}
        rule = self.ledger_rule()
        note = epsilon_note(
            eps,
            target=privacy.epsilon,
            calibration=privacy.calibration,
            noise_multiplier=rule.get("noise_multiplier"),
        )
        paper = privacy.calibration in _PAPER_CALIBRATIONS
        return {
            **({"epsilon_note": note} if note else {}),
            "mechanism": privacy.mechanism,
            "placement": privacy.placement,
            "delta": privacy.delta,
            "noise_std": max(self.noise_std, self.server_noise_std),
            **rule,
            **(
                {
                    "epsilon_target_meaning": "nominal epsilon of the paper's "
                    f"formula ('{privacy.calibration}' calibration), not a "
                    "guarantee, as is paper_epsilon_per_client (the formula's "
                    "epsilon for each client's uploads); epsilon_* are the ledger's"
                }
                if paper
                else {}
            ),
            **(
                {"noise_std_per_client": self.client_noise_std.tolist()}
                if self.client_noise_std is not None
                else {}
            ),
            "epsilon_target": privacy.epsilon,
            **self._paper_epsilon(paper),
            "epsilon_max": float(np.max(eps)),
            "epsilon_median": float(np.median(eps)),
            "epsilon_min": float(np.min(eps)),
            "epsilon_per_client": [float(e) for e in eps],
            "uploads_per_client": self.ledger.upload_count.tolist(),
            **(
                {}
                if self.local_dp is None
                else {
                    "epsilon_budget_per_client": self.local_dp.budgets.tolist(),
                    "max_participations": self.local_dp.max_participations().tolist(),
                }
            ),
        }
