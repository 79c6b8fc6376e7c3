"""One rule for every ledger: what the code clips, its L2 sensitivity, the adjacency.

A privacy ledger composes Gaussian releases of noise multiplier z = σ/Δ, where Δ
is the L2 sensitivity of the released vector *as the code enforces it*, and
claims amplification by subsampling only where the code samples records with a
known rate inside the release. This module is the single place that says which
Δ, adjacency and sample rate each mechanism of the emulator has; every ledger
(``rayfl.uplink.UplinkModel``, ``rayfl.hierarchy.dp.ObserverLedger``,
``rayfl.privacy.participation.LocalDPSGD``) asks it.

| mechanism | what the code clips | L2 sensitivity Δ | adjacency | ledger q |
|---|---|---|---|---|
| whole-update DP on the client (``gaussian``, ``quantized_gaussian``, DP-Ditto, WPFL) | the uploaded vector to ‖x‖ ≤ C | 2C | any two datasets of the client (so replace-one and add/remove-one record) | 1 |
| central DP (``placement: cloud``) | each client's update to C; the server noises the weighted mean with σ·max w/Σw | 2C per client (in units of the update; weight w_n/Σw ≤ max w/Σw) | any two datasets of one client | 1 |
| DP-SGD, ``sampling: poisson`` (DP-SparFL) | each sample's gradient to C (√s·C) | C on the sum per step | add/remove one record | b/abs(D_i) per step |
| DP-SGD, ``sampling: fixed`` (DP-SparFL) | each sample's gradient to C | 2C on the sum per step | replace one record | 1 (z = σ̂/2) |
| H2FDP device release (untrusted edge) | the accumulated step of s SGD steps to η·s·G | 2η·s·G | any two datasets of the device | 1 |
| H2FDP trusted edge | each device's step to η·s·G; the edge noises the mean | 2η·s·G·max ρ (= 2η·s·G/s_c with equal weights ρ = 1/s_c) | any two datasets of one device | 1 |
| Dithering baseline of the WPFL paper | the model to ‖x‖ ≤ C; Laplace(b) per coordinate | L1: 2C·√d | any two datasets of the client | pure ε = uploads·2C√d/b |

The adjacency column is the relation the *ledger* assumes for the noised
release alone. What else the server side sees can narrow it, and
:func:`adjacency` says what a run really holds for: an aggregation weight
abs(D_n) sent in the clear (every algorithm but Ditto/WPFL with
``aggregation: uniform``), a σ, sampling rate or schedule computed from
abs(D_n) (DP-Ditto's eq. 8, WPFL's ``sample_level`` baselines, DP-SparFL's q_i,
H2FDP's default q, ``topology.weighting: data_size``, a policy reading
``data_size``) changes with certainty when a record is added or removed, so
the guarantee holds for one record *replaced* only; a policy reading the
un-noised ``loss`` leaves none. ``summary.json`` reports it as
``privacy.adjacency`` (the ledger's relation as ``privacy.ledger_adjacency``).

Why 2C for a whole clipped update. The clipped update lies in the C-ball
whatever the client's data, so two datasets (differing in one record, or in all
of them) give updates at most 2C apart. A bound of C would need one record to
move the update by at most C, which clipping the whole update does not enforce.
Quantization after the noise (WPFL) and the channel are post-processing.

Why no sample rate for whole-update DP. Amplification by subsampling needs each
record to enter a release with probability q independently of the others
(Poisson sampling) inside the mechanism; whole-update mechanisms sample no
record (training visits epoch permutations or fixed-size batches, and the
scheduler's choice of clients is not a sample of records). The paper formulas
that take a q as an *input* (the WPFL paper's Theorem 1, H2FDP's eq. 15, the DP
baselines of the WPFL paper) read it from ``calibration_sample_rate``: it sets σ,
never the ledger.

Why H2FDP cannot use Δ/B. A device clips its accumulated step, not per-sample
gradients, so a record can move the step anywhere in its η·s·G ball. Even with
per-sample clipping, 2G/B bounds one mean-gradient step only: over s noise-free
local steps the two trajectories differ, so every other sample's gradient may
differ too (by up to 2G each), and the bound on the accumulated step is 2η·s·G.
``topology.dp.sensitivity_mode: per_sample_mean`` is refused for that reason.

Why the DP-SGD fixed-size batch has no amplification here. A batch of abs(b)
records drawn without replacement is not Poisson sampling; dp-accounting's
``SampledWithoutReplacementDpEvent`` supports RDP but not PLD, and the
emulator accounts both backends the same way, so it accounts q = 1 under
replace-one adjacency (Δ = 2C, z = σ̂/2): valid, and conservative.

Symbol table:

| paper symbol | code name | meaning |
|---|---|---|
| C, G | ``clip_norm``, ``grad_bound`` | clip thresholds |
| Δ | ``sensitivity`` | L2 sensitivity of one release |
| z, σ̂ | ``noise_multiplier`` | σ/Δ |
| q, q_i | ``sample_rate`` | Poisson rate of a record in one step |
| η, s, s_c, ρ | ``learning_rate``, ``steps``, ``subnet_size``, ``max_weight`` | H2FDP |
| d, b | ``dim``, ``laplace_scale`` | Dithering |
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "ADJACENCY_CLIENT",
    "ADJACENCY_NONE",
    "ADJACENCY_REMOVE_ONE",
    "ADJACENCY_REPLACE_ONE",
    "NO_DP",
    "Adjacency",
    "DPClaim",
    "LedgerRule",
    "adjacency",
    "dp_sgd_rule",
    "h2fdp_release_sensitivity",
    "laplace_vector_epsilon",
    "whole_update_sensitivity",
]

#: Adjacency of whole-update mechanisms: the bound holds between any two datasets
#: of one client (client-level DP), hence also for one record replaced, added or
#: removed.
ADJACENCY_CLIENT = (
    "any two datasets of one client (implies replace-one and add/remove-one record)"
)
#: Adjacency of Poisson-sampled DP-SGD: one record added or removed.
ADJACENCY_REMOVE_ONE = "add/remove one record"
#: Adjacency of fixed-size-batch DP-SGD, and of any mechanism whose server sees
#: abs(D_n) (an aggregation weight, a σ or a schedule computed from it): one
#: record replaced, abs(D_n) fixed.
ADJACENCY_REPLACE_ONE = "replace one record"
#: No record-level guarantee: the server sees an un-noised function of the data.
ADJACENCY_NONE = "none (no record-level guarantee)"
#: No DP mechanism in the run.
NO_DP = "no DP"


@dataclass(frozen=True)
class LedgerRule:
    """What one mechanism's ledger composes.

    Attributes:
        sensitivity: Human-readable Δ, e.g. ``"2C = 4"`` (summary.json).
        adjacency: One of the ``ADJACENCY_*`` strings.
        sample_rate: Poisson rate per step the ledger uses, scalar or (N,).
        noise_multiplier: z = σ/Δ per step, scalar or (N,).
    """

    sensitivity: str
    adjacency: str
    sample_rate: float | npt.NDArray[np.float64]
    noise_multiplier: float | npt.NDArray[np.float64]


def whole_update_sensitivity(clip_norm: float) -> float:
    """Return Δ = 2C of a whole update clipped to L2 norm C (client or cloud noise).

    Args:
        clip_norm: C > 0.

    Returns:
        2C: the clipped update lies in the C-ball whatever the data.

    Example:
        >>> whole_update_sensitivity(1.5)
        3.0
    """
    if not (clip_norm > 0 and math.isfinite(clip_norm)):
        raise ValueError(f"clip_norm must be finite and > 0, got {clip_norm}")
    return 2.0 * float(clip_norm)


def dp_sgd_rule(
    *,
    noise_multiplier: float,
    sampling: str,
    batch_size: int,
    num_train: npt.ArrayLike,
) -> LedgerRule:
    """Return the per-step ledger rule of DP-SGD with per-sample clipping at C.

    The noise std on the sum of clipped per-sample gradients is σ̂·C.

    Args:
        noise_multiplier: σ̂ (std / C).
        sampling: "poisson" (each record kept with q_i = b/abs(D_i)) or "fixed"
            (b records without replacement).
        batch_size: b, expected (poisson) or exact (fixed) batch size.
        num_train: abs(D_i) per client, (N,).

    Returns:
        poisson: add/remove-one, Δ = C, z = σ̂, q_i = min(1, b/abs(D_i));
        fixed: replace-one, Δ = 2C, z = σ̂/2, q = 1.

    Raises:
        ValueError: For an unknown sampling.

    Example:
        >>> rule = dp_sgd_rule(noise_multiplier=1.0, sampling="fixed",
        ...                    batch_size=10, num_train=[100])
        >>> rule.noise_multiplier, rule.sample_rate
        (0.5, 1.0)
    """
    sizes = np.maximum(np.asarray(num_train, dtype=np.float64).reshape(-1), 1.0)
    if sampling == "poisson":
        return LedgerRule(
            sensitivity="C per step on the sum of per-sample clipped gradients",
            adjacency=ADJACENCY_REMOVE_ONE,
            sample_rate=np.minimum(1.0, batch_size / sizes),
            noise_multiplier=float(noise_multiplier),
        )
    if sampling == "fixed":
        return LedgerRule(
            sensitivity="2C per step on the sum of per-sample clipped gradients",
            adjacency=ADJACENCY_REPLACE_ONE,
            sample_rate=1.0,
            noise_multiplier=float(noise_multiplier) / 2.0,
        )
    raise ValueError(f"sampling must be 'poisson' or 'fixed', got {sampling!r}")


def h2fdp_release_sensitivity(
    *,
    learning_rate: float,
    steps: int,
    grad_bound: float,
    max_weight: float = 1.0,
) -> float:
    """Return Δ = 2·η·s·G·max ρ of one H2FDP release (device: ρ = 1).

    The device clips its accumulated step over ``steps`` SGD steps to η·s·G, so
    its release moves by at most 2η·s·G between any two of its datasets; a
    trusted edge releasing Σ ρ_i u_i (Σ ρ = 1) moves by at most that times the
    largest weight (1/s_c with equal weights).

    Args:
        learning_rate: η > 0.
        steps: s ≥ 1, SGD steps accumulated in the release.
        grad_bound: G > 0.
        max_weight: max ρ_i of the edge mean (1 for a device's own release).

    Returns:
        Δ > 0.

    Example:
        >>> h2fdp_release_sensitivity(learning_rate=0.1, steps=5, grad_bound=1.0,
        ...                           max_weight=0.5)
        0.5
    """
    return 2.0 * learning_rate * steps * grad_bound * max_weight


def laplace_vector_epsilon(
    uploads: npt.ArrayLike, *, clip_norm: float, dim: int, laplace_scale: float
) -> npt.NDArray[np.float64]:
    """Return the pure ε of Laplace(b) noise on each coordinate of a C-clipped vector.

    Two vectors in the C-ball differ by at most 2C in L2, hence 2C·√d in L1; the
    Laplace mechanism of scale b is (L1 Δ / b)-DP per upload and uploads compose
    by basic composition (δ = 0).

    Args:
        uploads: Uploads per client, (N,).
        clip_norm: C.
        dim: d, coordinates of the vector.
        laplace_scale: b > 0 (0 gives ∞).

    Returns:
        ε per client, (N,), 0 for no upload.

    Example:
        >>> laplace_vector_epsilon([0, 2], clip_norm=1.0, dim=4,
        ...                        laplace_scale=2.0).tolist()
        [0.0, 4.0]
    """
    counts = np.asarray(uploads, dtype=np.float64).reshape(-1)
    per_upload = (
        2.0 * clip_norm * math.sqrt(dim) / laplace_scale
        if laplace_scale > 0
        else math.inf
    )
    return np.where(counts > 0, counts * per_upload, 0.0)


@dataclass(frozen=True)
class Adjacency:
    """The neighbouring datasets a run's privacy guarantee is stated for.

    Attributes:
        relation: One of ``ADJACENCY_CLIENT``, ``ADJACENCY_REMOVE_ONE``,
            ``ADJACENCY_REPLACE_ONE``, ``ADJACENCY_NONE`` or ``NO_DP``.
        reason: Why, from what the run's server side sees (summary.json's
            ``adjacency_reason``).
    """

    relation: str
    reason: str


#: Algorithms whose ``aggregation`` field may make the upload weight uniform;
#: every other one weighs an upload by abs(D_n) (``ClientUpdate.weight``).
_UNIFORM_CAPABLE = ("ditto", "wpfl")


@dataclass(frozen=True)
class DPClaim:
    """A topology's own DP rules, from its plug-in's ``dp_claim`` hook.

    A topology whose DP is not the uplink's (``privacy`` and the algorithm's
    DP) states here what :func:`adjacency` needs.

    Attributes:
        mechanism: The ledger's relation and what the mechanism bounds
            (e.g. ``(ADJACENCY_CLIENT, "each device's step is clipped...")``),
            or None for no DP.
        no_dp_reason: Why there is no DP (when ``mechanism`` is None).
        size_releases: What else the server side sees that is computed from
            abs(D_n) without noise (besides a policy reading ``data_size``).
    """

    mechanism: tuple[str, str] | None
    no_dp_reason: str = ""
    size_releases: tuple[str, ...] = ()


def adjacency(cfg: Any, topology: Any = None) -> Adjacency:
    """Return the adjacency a run's DP guarantee really holds for, and why.

    The ledger's ε bounds the releases' noise at the sensitivity the code
    enforces, for the relation of its mechanism (the table above). What else
    the server side sees can narrow it: a value computed from abs(D_n) without
    noise (an aggregation weight, a noise std, a sampling rate or a schedule
    that reads ``data_size``) changes when a record is added or removed, so the
    guarantee then holds for replacing one record only (abs(D_n) fixed); an
    un-noised training loss read by the scheduler leaves no record-level
    guarantee at all. This is the one place that decides it: ``summary.json``
    (``privacy.adjacency``, ``privacy.adjacency_reason``) and the table of
    ``docs/privacy.md`` come from it.

    Args:
        cfg: The run config (:class:`rayfl.config.RunConfig`).
        topology: Its topology's plug-in (default: the registry's, for
            ``cfg``); its ``dp_claim(cfg)`` gives the topology's own DP rules,
            None the uplink's.

    Returns:
        The relation and its reason.

    Example:
        >>> from rayfl.config import load_config
        >>> dp = {"mechanism": "gaussian", "clip_norm": 1.0, "noise_multiplier": 1.0}
        >>> adjacency(load_config({"privacy": dp})).relation
        'replace one record'
        >>> uniform = {"kind": "ditto", "aggregation": "uniform"}
        >>> adjacency(load_config({"privacy": dp, "algorithm": uniform})).relation
        'any two datasets of one client (implies replace-one and add/remove-one record)'
    """
    if topology is None:
        from rayfl.registry import topology_of

        topology = topology_of(cfg)
    claim = topology.dp_claim(cfg)
    mechanism = _mechanism(cfg) if claim is None else claim.mechanism
    if mechanism is None:
        return Adjacency(
            NO_DP, _no_dp_reason(cfg) if claim is None else claim.no_dp_reason
        )
    relation, reason = mechanism
    keys = _policy_keys(cfg)
    if "loss" in keys:
        return Adjacency(
            ADJACENCY_NONE,
            f"{reason}; but scheduler.policy={cfg.scheduler.policy} reads each "
            "client's training loss, computed on its data without noise, so the "
            "schedule carries an un-noised function of the records",
        )
    sizes = _size_releases(cfg, keys, claim)
    if not sizes:
        return Adjacency(relation, reason)
    why = (
        f"{reason}; but {'; '.join(sizes)}: adding or removing a record changes "
        "abs(D_n), which the server side sees, so the guarantee covers one record "
        "replaced (abs(D_n) fixed)"
    )
    if relation == ADJACENCY_REMOVE_ONE:
        why += (
            "; the ledger's epsilon is the add/remove-one bound and a replacement "
            "is a removal plus an addition, so replace-one holds at (2 epsilon, "
            "(1 + e^epsilon) delta) by group privacy"
        )
    return Adjacency(ADJACENCY_REPLACE_ONE, why)


def _mechanism(cfg: Any) -> tuple[str, str] | None:
    """Return the relation of the uplink's DP mechanism and what it bounds, or None."""
    algo, privacy = cfg.algorithm, cfg.privacy
    if algo.kind == "sparse_dp":
        if algo.sampling == "poisson":
            return (
                ADJACENCY_REMOVE_ONE,
                "DP-SGD clips each sample's gradient and Poisson-samples records "
                "(the accountant's add/remove-one analysis)",
            )
        return (
            ADJACENCY_REPLACE_ONE,
            "DP-SGD with fixed-size batches, accounted under replace-one (2C)",
        )
    if privacy.mechanism == "none" or getattr(algo, "dp_mechanism", "") == "none":
        return None
    noise = "the server adds" if privacy.placement == "cloud" else "the client adds"
    return (
        ADJACENCY_CLIENT,
        f"each upload is clipped to C as a whole and {noise} noise calibrated to "
        "2C, whatever the client's data",
    )


def _no_dp_reason(cfg: Any) -> str:
    if getattr(cfg.algorithm, "dp_mechanism", "") == "none":
        return "algorithm.dp_mechanism=none adds no noise"
    return "privacy.mechanism=none: no noise"


def _policy_keys(cfg: Any) -> tuple[str, ...]:
    """Return the observation keys the run's scheduling policy reads."""
    from rayfl.registry import policy_class

    keys: tuple[str, ...] = getattr(
        policy_class(cfg.scheduler.policy), "required_keys", ()
    )
    return keys


def _size_releases(cfg: Any, keys: tuple[str, ...], claim: DPClaim | None) -> list[str]:
    """Return what the server side sees that is computed from abs(D_n), un-noised."""
    algo, privacy = cfg.algorithm, cfg.privacy
    found = []
    if "data_size" in keys:
        found.append(
            f"scheduler.policy={cfg.scheduler.policy} reads each client's data_size"
        )
    if claim is not None:
        return found + list(claim.size_releases)
    if algo.kind not in _UNIFORM_CAPABLE or algo.aggregation != "uniform":
        found.append(
            f"algorithm.kind={algo.kind} sends abs(D_n) in the clear as the "
            "upload's aggregation weight"
            + (
                " (and the server's noise scales with it)"
                * (privacy.placement == "cloud")
            )
        )
    if algo.kind == "sparse_dp" and algo.sampling == "poisson":
        found.append("q_i = B/abs(D_i) sets each client's participations")
    if (
        privacy.calibration == "dp_ditto"
        and privacy.noise_std is None
        and privacy.noise_multiplier is None
    ):
        found.append("privacy.calibration=dp_ditto sets sigma from abs(D_n) (eq. 8)")
    if (
        algo.kind == "wpfl"
        and algo.dp_mechanism not in ("proposed", "none")
        and algo.sensitivity == "sample_level"
    ):
        found.append("algorithm.sensitivity=sample_level sets sigma from min abs(D_n)")
    return found
