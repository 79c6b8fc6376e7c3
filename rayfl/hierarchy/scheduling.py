"""Per-edge bands of the hierarchy: observations, actions and S_c^k.

Each edge server c owns its own uplink band of K_e orthogonal subchannels
(``topology.scheduling.subchannels_per_edge``). At the start of global round k
the edge sees its subnet S_c = (d_0, …, d_{n_c−1}) (the subnet's device ids in
ascending order) exactly as the flat :class:`envs.star.scheduling.WirelessFLEnv`
sees its clients: an observation table with N = n_c rows and K = K_e
subchannels, and it answers with the flat action ``MultiDiscrete([n_c + 1] *
K_e)``. Each edge is one decision unit of the engine: its decider (one
registered policy per edge, ``rayfl.hierarchy.deciders``) turns the observation
into the edge's schedule, which :meth:`EdgeScheduling.participants_of` maps to
S_c^k; :class:`envs.hierarchy.scheduling.HierarchicalSchedulingEnv` exposes the same
decision to an external agent as one concatenated action.

Mapping of an action onto the hierarchy:

| action | meaning |
|---|---|
| ``a_c[k] = j`` (0 ≤ j < n_c) | device d_j of subnet c uploads on subchannel k of edge c |
| ``a_c[k] = n_c`` | subchannel k of edge c idles |
| concatenation ``[a_0, a_1, …, a_{N−1}]`` (env) | edge c's block is entries Σ_{c'<c} K_e … + K_e − 1 |
| S_c^k | {d_j : a_c[k] = j for an open subchannel k}, sorted by id |

Observation table of edge c (the flat env's keys and units):

| key | shape | meaning |
|---|---|---|
| channel_gain | (n_c, K_e) | β_0 − 10 α̂ log10(d_i) + 10 log10 abs(u_{i,k})² dB (``topology.cost`` model, Rayleigh abs(u)² ~ Exp(1)); −inf on a closed subchannel |
| loss | (n_c,) | last training loss the device reported (initially the global model's test loss, measured only when the policy reads ``loss``) |
| upload_count | (n_c,) | local uploads (segments) the device has made so far |
| privacy_spent | (n_c,) | worst-observer accountant ε of the device (0 without DP; read only when the policy requires it) |
| staleness | (n_c,) | global rounds since the device last participated |
| data_size | (n_c,) | training samples of the device |
| eligible | (n_c,) | 1 (the hierarchy has no per-device budget stop) |
| round | (1,) | global round k |

Symbol table:

| paper / spec symbol | code name |
|---|---|
| S_c, n_c = abs(S_c) | ``subnets[c]``, ``len(subnets[c])`` |
| K_e | ``num_subchannels[c]`` (``subchannels_per_edge`` or n_c) |
| s_c^k (controller) | ``caps[c]`` |
| abs(u_{i,k})² | ``fading(key, device)[k]`` |

Implementation details:
    1. Reconciliation with the controller's s_c^k (Algorithm 1): the edge opens
       o_c^k = K_e subchannels when s_c^k = n_c (no cap; always so without
       control) and o_c^k = min(K_e, s_c^k) otherwise; subchannels o_c^k … K_e − 1
       are closed for the interval: the observation reports their gain as −inf dB
       (so gain-maximising policies leave them to the weakest devices) and a
       device the action puts on a closed subchannel does not upload. Hence
       abs(S_c^k) = number of devices on open subchannels ≤ min(K_e, s_c^k).
    2. Fading of device i on subchannel k is keyed by (seed,
       "hier_subchannel_fading", key, i) with key = k (``coherence: interval``,
       the upload sees the channel the decision saw) or the local period index
       (``coherence: period``; the decision sees the interval's first period).
       ``frequency_selective: False`` draws one abs(u)² per device for the band.
    3. The energy/delay of every upload (``rayfl.hierarchy.cost``) uses the
       fading of the subchannel the device was assigned; the subnet's uploads
       stay summed (TDMA accounting of spec §2.7) so the policy path and the
       uniform path are costed by the same formula.
    4. Actions and schedules are validated before use (shape (K_e,), integers
       in [0, n_c], devices of the edge's subnet): a bad one raises
       ``ValueError`` naming the edge. A device an action puts on several
       subchannels keeps the lowest one, the others idle (as the star env).
    5. A decision without subchannels (the ``uniform`` policy's participants)
       prices each upload with the fading keyed (seed, "hier_fading", period,
       device) instead (:func:`upload_fading`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.hierarchy.config import CostConfig, HierSchedulingConfig
from rayfl.observation import observation_space
from rayfl.schedule import Schedule
from rayfl.seeding import rng_for

__all__ = [
    "EdgeScheduling",
    "OBS_KEYS",
    "edge_spaces",
    "upload_fading",
    "validate_action",
]

#: Keys of each edge's observation, as the flat env's table.
OBS_KEYS = (
    "channel_gain",
    "loss",
    "upload_count",
    "privacy_spent",
    "staleness",
    "data_size",
    "eligible",
    "round",
)


def edge_spaces(num_devices: int, num_subchannels: int) -> tuple[Any, Any]:
    """Return the flat env's (observation_space, action_space) for one edge.

    Args:
        num_devices: n_c, devices of the subnet.
        num_subchannels: K_e.

    Returns:
        A gymnasium ``Dict`` with the keys of :data:`OBS_KEYS` and
        ``MultiDiscrete([n_c + 1] * K_e)``.
    """
    from gymnasium import spaces

    n, k = int(num_devices), int(num_subchannels)
    obs = observation_space(OBS_KEYS, n, k)  # the engine's schema
    return obs, spaces.MultiDiscrete(np.full(k, n + 1, dtype=np.int64))


def validate_action(
    action: Any, *, edge: int, num_devices: int, num_subchannels: int
) -> npt.NDArray[np.int64]:
    """Return edge ``edge``'s action as a (K_e,) int64 array, repeats idled, or raise.

    Args:
        action: The action (array-like, or a ``Dict`` action with
            ``"assignment"``; a ``"power"`` entry is refused: the cost model has
            one transmit power).
        edge: c (for the error message).
        num_devices: n_c.
        num_subchannels: K_e.

    A device on several subchannels keeps the lowest one; the others become
    idle (n_c), as ``WirelessFL-v0`` repairs a client named twice.

    Raises:
        ValueError: Wrong shape or dtype, or a device id outside [0, n_c].

    Example:
        >>> validate_action([2, 0], edge=0, num_devices=3, num_subchannels=2).tolist()
        [2, 0]
        >>> validate_action([0, 1, 0], edge=1, num_devices=3, num_subchannels=3).tolist()
        [0, 1, 3]
    """
    if isinstance(action, dict):
        extra = sorted(set(action) - {"assignment"})
        if extra:
            raise ValueError(
                f"edge {edge}: the hierarchy's action has only 'assignment', got {extra}"
            )
        action = action["assignment"]
    values = np.asarray(action)
    if values.shape != (num_subchannels,) or not (
        np.issubdtype(values.dtype, np.integer) or values.size == 0
    ):
        raise ValueError(
            f"edge {edge}: action must be {num_subchannels} integers (device index in "
            f"0..{num_devices - 1} of the subnet per subchannel, {num_devices} = idle), "
            f"got {action!r}"
        )
    values = values.astype(np.int64)
    bad = np.flatnonzero((values < 0) | (values > num_devices))
    if bad.size:
        s = int(bad[0])
        raise ValueError(
            f"edge {edge}: subchannel {s}: device {int(values[s])} is not in "
            f"0..{num_devices} ({num_devices} = idle)"
        )
    first = np.zeros(values.shape, dtype=bool)
    first[np.unique(values, return_index=True)[1]] = True  # lowest subchannel
    return np.where(first, values, num_devices)


class EdgeScheduling:
    """The per-edge bands, observations and schedule → S_c^k mapping.

    Args:
        config: ``topology.scheduling``.
        cost: ``topology.cost`` (the channel model of the gains).
        seed: The run seed.
        subnets: S_c per edge (device ids).
        distance_m: Device-edge distance of every device (I,).
        num_train: Training samples of every device (I,).
        needed_keys: Observation keys the deciders read; the costly ``loss``
            and ``privacy_spent`` are filled only when listed.
    """

    def __init__(
        self,
        config: HierSchedulingConfig,
        *,
        cost: CostConfig,
        seed: int,
        subnets: Sequence[Sequence[int]],
        distance_m: npt.ArrayLike,
        num_train: npt.ArrayLike,
        needed_keys: Iterable[str] = OBS_KEYS,
    ) -> None:
        self.config = config
        self.seed = int(seed)
        self.subnets = [
            np.asarray(sorted(int(i) for i in s), np.int64) for s in subnets
        ]
        distance = np.asarray(distance_m, dtype=np.float64)
        #: Large-scale gain β_0 − 10 α̂ log10(d) of every device, dB.
        self.large_scale_db = (
            cost.ref_gain_db - 10 * cost.path_loss_exponent * np.log10(distance)
        )
        self.num_train = np.asarray(num_train, dtype=np.float64)
        k_e = config.subchannels_per_edge
        self.num_subchannels = [int(k_e or len(s)) for s in self.subnets]
        self.needed_keys: set[str] = set(needed_keys)
        #: c → (subnets[c], its set), kept while subnets[c] is that array.
        self._member_sets: dict[int, tuple[Any, frozenset[int]]] = {}
        self.reset()

    def reset(self) -> None:
        """Clear the per-device history."""
        n = len(self.num_train)
        self.staleness = np.zeros(n)
        self.loss = np.full(n, np.nan)

    # ------------------------------------------------------------- channel
    def fading(
        self, key: int, device: int, num_subchannels: int
    ) -> npt.NDArray[np.float64]:
        """Return abs(u_{i,k})² of device ``device`` on each subchannel (detail 2)."""
        rng = rng_for(self.seed, "hier_subchannel_fading", round=key, client=device)
        if self.config.frequency_selective:
            return rng.exponential(1.0, size=num_subchannels)
        return np.full(num_subchannels, rng.exponential(1.0))

    def fading_key(self, round: int, period: int) -> int:
        """Return the key of the fading an upload at (round, period) sees."""
        return round if self.config.coherence == "interval" else period

    def gains_db(self, c: int, key: int) -> npt.NDArray[np.float64]:
        """Return edge c's (n_c, K_e) channel gains in dB for fading key ``key``."""
        k_e = self.num_subchannels[c]
        fading = np.stack([self.fading(key, int(i), k_e) for i in self.subnets[c]])
        return self.large_scale_db[self.subnets[c], None] + 10 * np.log10(fading)

    @staticmethod
    def open_subchannels(num_subchannels: int, size: int, cap: int) -> int:
        """Return o_c^k = K_e if s_c^k ≥ n_c else min(K_e, s_c^k) (detail 1)."""
        return num_subchannels if cap >= size else min(num_subchannels, int(cap))

    # ------------------------------------------------------------- decisions
    def observations(
        self,
        round: int,
        period: int,
        caps: npt.ArrayLike,
        *,
        upload_count: npt.ArrayLike,
        privacy_spent: npt.ArrayLike | None = None,
    ) -> list[dict[str, npt.NDArray[np.float32]]]:
        """Return every edge's observation for global round ``round``.

        Args:
            round: k.
            period: Index of the interval's first local period (fading key under
                ``coherence: period``).
            caps: s_c^k per edge.
            upload_count: Uploads so far per device (I,).
            privacy_spent: Worst-observer ε per device (I,), or None for zeros.
        """
        key = self.fading_key(round, period)
        uploads = np.asarray(upload_count, dtype=np.float64)
        eps = (
            np.zeros(len(self.num_train))
            if privacy_spent is None
            else np.minimum(np.asarray(privacy_spent, dtype=np.float64), 3e38)
        )
        loss = np.nan_to_num(self.loss, nan=0.0)
        out = []
        for c, members in enumerate(self.subnets):
            k_e = self.num_subchannels[c]
            gain = self.gains_db(c, key)
            open_k = self.open_subchannels(k_e, len(members), int(np.asarray(caps)[c]))
            gain[:, open_k:] = -np.inf
            out.append(
                {
                    "channel_gain": gain.astype(np.float32),
                    "loss": np.maximum(loss[members], 0).astype(np.float32),
                    "upload_count": uploads[members].astype(np.float32),
                    "privacy_spent": eps[members].astype(np.float32),
                    "staleness": self.staleness[members].astype(np.float32),
                    "data_size": self.num_train[members].astype(np.float32),
                    "eligible": np.ones(len(members), dtype=np.float32),
                    "round": np.array([round], dtype=np.float32),
                }
            )
        return out

    def participants_of(
        self, decision: Sequence[Schedule], caps: npt.ArrayLike
    ) -> tuple[list[list[int]], dict[int, int] | None]:
        """Map one schedule per edge to S_c^k and each participant's subchannel.

        A device on a closed subchannel does not take part (detail 1); of a
        participants-only decision (no subchannels) an edge keeps its o_c^k
        lowest ids, as the star keeps its first K participants.

        Args:
            decision: One schedule per edge, global device ids.
            caps: s_c^k per edge.

        Returns:
            (S_c^k per edge as sorted ids, {device: subchannel of its edge}, or
            None when the decision gives no subchannels).

        Raises:
            ValueError: Wrong number of schedules, a device outside its edge's
                subnet, a subchannel outside the band, more devices on open
                subchannels than o_c^k, or subchannels given for some devices only.
        """
        if len(decision) != len(self.subnets):
            raise ValueError(
                f"expected one schedule per edge ({len(self.subnets)}), "
                f"got {len(decision)}"
            )
        clients = [s.clients.tolist() for s in decision]
        subs = [s.subchannel.tolist() for s in decision]
        assigned = {any(k >= 0 for k in sub) for sub in subs if sub}
        if len(assigned) > 1 or any(min(sub) < 0 <= max(sub) for sub in subs if sub):
            raise ValueError("give a subchannel to every scheduled device or to none")
        chosen: list[list[int]] = []
        subchannel: dict[int, int] = {}
        caps_of = np.asarray(caps).tolist()
        for c, (mine, sub) in enumerate(zip(clients, subs, strict=True)):
            picked = self._edge_participants(c, mine, sub, int(caps_of[c]))
            chosen.append(sorted(picked))
            subchannel.update({i: k for i, k in picked.items() if k >= 0})
        return chosen, (subchannel if assigned == {True} else None)

    def _edge_participants(
        self, c: int, clients: list[int], subs: list[int], cap: int
    ) -> dict[int, int]:
        """Edge c's participants on open subchannels: {device: subchannel or -1}."""
        members = self._member_set(c)
        if not members.issuperset(clients):
            outside = sorted(set(clients) - members)
            raise ValueError(f"edge {c}: devices {outside} are not in its subnet")
        k_e = self.num_subchannels[c]
        bad = [k for k in subs if k >= k_e]
        if bad:
            raise ValueError(f"edge {c}: subchannel {bad[0]} is not in 0..{k_e - 1}")
        open_k = self.open_subchannels(k_e, len(members), cap)
        picked = {i: k for i, k in zip(clients, subs, strict=True) if k < open_k}
        if all(k < 0 for k in subs):  # participants: the lowest ids
            picked = dict(sorted(picked.items())[:open_k])
        if len(picked) > open_k:
            raise ValueError(
                f"edge {c}: {len(picked)} devices take part; at most {open_k} may "
                f"(s_c^k = {cap}, K_e = {k_e})"
            )
        return picked

    def _member_set(self, c: int) -> frozenset[int]:
        """Edge c's subnet as a set (kept while ``subnets[c]`` is the same array)."""
        members, kept = self.subnets[c], self._member_sets.get(c)
        if kept is None or kept[0] is not members:
            kept = self._member_sets[c] = (members, frozenset(members.tolist()))
        return kept[1]

    def observe(
        self, chosen: Sequence[Sequence[int]], rows: Sequence[dict[str, Any]]
    ) -> None:
        """Update staleness and last losses after a global round."""
        self.staleness += 1
        for members in chosen:
            self.staleness[list(members)] = 0
        for r in rows:
            loss = float(r.get("train_loss", np.nan))
            if np.isfinite(loss):
                self.loss[int(r["client"])] = loss

    def state_dict(self) -> dict[str, Any]:
        """Return the per-device histories (checkpoints)."""
        return {
            "staleness": self.staleness.copy(),
            "loss": self.loss.copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.staleness = np.asarray(state["staleness"], dtype=np.float64)
        self.loss = np.asarray(state["loss"], dtype=np.float64)


def upload_fading(
    scheduling: EdgeScheduling | None,
    subchannel: dict[int, int] | None,
    *,
    seed: int,
    k: int,
    edge: int,
    period: int,
    devices: list[int],
) -> npt.NDArray[np.float64]:
    """Return abs(u)² of each upload of ``devices`` (edge c, local period p).

    With a subchannel assignment, the fading of each device's subchannel
    (detail 2); without one, one draw keyed (seed, "hier_fading", p, device).
    """
    if scheduling is not None and subchannel is not None:
        key = scheduling.fading_key(k, period)
        k_e = scheduling.num_subchannels[edge]
        return np.array(
            [scheduling.fading(key, i, k_e)[subchannel[i]] for i in devices]
        )
    return np.array(
        [
            rng_for(seed, "hier_fading", round=period, client=i).exponential(1.0)
            for i in devices
        ]
    )
