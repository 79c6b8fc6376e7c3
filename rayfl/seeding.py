"""Random generators keyed by (seed, purpose, round, client).

DESIGN.md's determinism rule: every random draw in a run comes from a generator
made here, so the same seed gives the same metrics whatever the packing of clients
into actors, the number of CPUs or of nodes. A generator is never shared across
clients or rounds; each (purpose, round, client) gets its own independent stream
(numpy's ``SeedSequence`` spawns statistically independent streams from the key).

Example:
    >>> a = rng_for(7, "batch", round=3, client=5).integers(1 << 30)
    >>> b = rng_for(7, "batch", round=3, client=5).integers(1 << 30)
    >>> bool(a == b)
    True
"""

from __future__ import annotations

import numpy as np

#: Stable integer ids of the purposes a draw may serve. Never renumber: the ids
#: are part of every run's reproducibility contract.
PURPOSES: dict[str, int] = {
    "partition": 1,
    "init": 2,
    "batch": 3,
    "channel": 4,
    "noise": 5,
    "schedule": 6,
    "quantize": 7,
    "effects": 8,
    "geometry": 9,
    "sparsify": 10,
    "policy": 11,
    "env": 12,
    "server_noise": 13,
    "packet_loss": 14,
    "eval_adapt": 30,
    "downlink": 18,
    "d2d_geometry": 15,
    "d2d_link": 16,
    "d2d_personal_batch": 17,
    "epsilon_budget": 19,
    # hierarchical DP (rayfl.hierarchy, issue 8): ids 40+ to stay clear of others
    "hier_topology": 40,
    "hier_device_noise": 41,
    "hier_edge_noise": 42,
    "hier_fading": 43,
    "hier_participants": 44,
    "hier_policy": 45,
    "hier_subchannel_fading": 46,
    # D2D neighbor-selection env (envs.d2d, issue 9): ids 50+
    "d2d_csi": 50,
    "d2d_surrogate": 51,
    # seed 000's Dithering baseline (rayfl.compression.dithering): ids 60+
    "dither": 60,
    # learned-scheduler training over several data partitions (envs.rl, issue 11)
    "partition_cycle": 70,
    # populations generated on demand and sampled evaluation (issue 37): 80+
    "population": 80,
    "eval_sample": 81,
    # wireless worlds that move (rayfl.wireless.dynamics, issue 48): 90+
    "fading_ar": 90,
    "availability": 91,
    "cpu_frequency": 92,
}

__all__ = ["PURPOSES", "rng_for", "torch_seed_for"]


def rng_for(
    seed: int, purpose: str, *, round: int = 0, client: int = 0
) -> np.random.Generator:
    """Return the generator of one (seed, purpose, round, client) key.

    Args:
        seed: The run's seed (config ``seed``), a non-negative integer.
        purpose: One of :data:`PURPOSES`.
        round: Round index (0-based); 0 for draws made once per run.
        client: Client id; 0 for draws that are not per client.

    Returns:
        A fresh ``np.random.Generator`` (PCG64) seeded by the key.

    Raises:
        KeyError: If ``purpose`` is unknown.
    """
    if purpose not in PURPOSES:
        raise KeyError(f"unknown rng purpose {purpose!r}; known: {sorted(PURPOSES)}")
    # = np.random.default_rng(key), the same stream at half the cost
    key = [int(seed), PURPOSES[purpose], int(round), int(client)]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(key)))


def torch_seed_for(seed: int, purpose: str, *, round: int = 0, client: int = 0) -> int:
    """Return a 63-bit integer seed for a ``torch.Generator`` of the same key."""
    return int(rng_for(seed, purpose, round=round, client=client).integers(2**63 - 1))
