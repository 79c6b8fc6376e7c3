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

import functools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.random.bit_generator import ISpawnableSeedSequence

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
    # D2D nodes that move (rayfl.d2d.motion, issue 48)
    "d2d_mobility_start": 52,
    "d2d_mobility": 53,
    # links to a D2D target that fade with memory (rayfl.d2d.devices, issue 48)
    "d2d_fading_ar": 54,
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
    "mobility_start": 93,
    "mobility": 94,
    "shadowing_ar": 95,
    "fading_ar_downlink": 98,  # seed of the downlink's AR(1) (rayfl.wireless.world)
}

__all__ = [
    "PURPOSES",
    "normal_into",
    "normal_rows",
    "rng_for",
    "rng_for_many",
    "rng_reseeded",
    "torch_seed_for",
]


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
    # = np.random.default_rng(key), the same stream at half the cost
    key = [int(seed), _purpose_id(purpose), int(round), int(client)]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(key)))


def rng_for_many(
    seed: npt.ArrayLike | int,
    purpose: str,
    *,
    rounds: npt.ArrayLike | int = 0,
    clients: npt.ArrayLike | int = 0,
) -> list[np.random.Generator]:
    """Return the generators of many (seed, purpose, round, client) keys at once.

    ``rng_for_many(s, p, rounds=r, clients=c)[i]`` draws the stream of
    ``rng_for(s[i], p, round=r[i], client=c[i])`` (``seed``, ``rounds`` and
    ``clients`` broadcast against each other), with the keys' seeding done as
    array operations (Implementation details below).

    Args:
        seed: The run's seed, or each key's (lanes of different seeds).
        purpose: One of :data:`PURPOSES`.
        rounds: Round index of each key, or one for all.
        clients: Client id of each key, or one for all.

    Returns:
        One fresh generator per key, in order.

    Raises:
        KeyError: If ``purpose`` is unknown.

    Implementation details:
        ``np.random.default_rng(key)`` hashes the key into PCG64's 256-bit
        seed with ``SeedSequence`` (O'Neill's seed_seq hash: per 32-bit word a
        multiply-xorshift mix), which costs far more than the generator it
        seeds. :func:`_state_words` runs the same hash on all keys at once in
        uint32 arithmetic, and each generator receives its words through
        :class:`_KeySeed` (``SeedSequence``'s interface, ``spawn`` included).
        tests/test_seeding_ids.py checks the streams against ``SeedSequence`` on
        random and edge keys.
    """
    (s, r, c), keys = _key_rows(seed, purpose, rounds, clients)
    if keys is None:
        return [
            rng_for(int(a), purpose, round=int(b), client=int(d))
            for a, b, d in zip(s.tolist(), r.tolist(), c.tolist(), strict=True)
        ]
    words = _state_words(keys)
    return [
        np.random.Generator(np.random.PCG64(_KeySeed(tuple(k), w)))  # type: ignore[arg-type]
        for k, w in zip(keys.tolist(), words, strict=True)
    ]


def rng_reseeded(
    seed: npt.ArrayLike | int,
    purpose: str,
    *,
    rounds: npt.ArrayLike | int = 0,
    clients: npt.ArrayLike | int = 0,
) -> Iterator[np.random.Generator]:
    """Yield, key after key, one generator set to each key's stream.

    The i-th generator yielded draws what ``rng_for_many(...)[i]`` draws, but
    it is one ``Generator`` whose PCG64 state is set to each key's in turn
    (the same state ``PCG64`` seeds from the key's words, eq. of
    ``pcg_setseq_128_srandom_r``): use each before asking for the next. It
    skips building a generator per key, for keys that draw once.

    Args:
        seed: The run's seed, or each key's.
        purpose: One of :data:`PURPOSES`.
        rounds: Round index of each key, or one for all.
        clients: Client id of each key, or one for all.

    Yields:
        The shared generator, at the next key's stream.

    Raises:
        KeyError: If ``purpose`` is unknown.
    """
    (s, r, c), keys = _key_rows(seed, purpose, rounds, clients)
    if keys is None:
        yield from rng_for_many(s, purpose, rounds=r, clients=c)
        return
    bits = np.random.PCG64(0)
    gen = np.random.Generator(bits)
    put = _state_setter(bits)
    mult, mask = _PCG_MULT, _MASK128
    for w0, w1, w2, w3 in _state_words(keys).tolist():
        inc = ((((w2 << 64) | w3) << 1) | 1) & mask
        put(((inc + ((w0 << 64) | w1)) * mult + inc) & mask, inc)
        yield gen


def _state_setter(bits: np.random.PCG64) -> Any:
    """Return ``put(state, inc)``: set ``bits``' 128-bit state and increment.

    Through ``bits.state`` (a dict, ~2.6 µs) unless the bit generator's memory
    (its ctypes view) takes the direct writes of :func:`_direct_setter` as
    checked once on a probe (~0.5 µs).
    """
    direct = _direct_setter(bits) if _direct_writes_work() else None
    if direct is not None:
        return direct
    full: Any = {"bit_generator": "PCG64", "has_uint32": 0, "uinteger": 0}

    def by_dict(state: int, inc: int) -> None:
        full["state"] = {"state": state, "inc": inc}
        bits.state = full

    return by_dict


def _direct_setter(bits: np.random.PCG64) -> Any:
    """``put(state, inc)`` writing ``bits``' words in place, or None without a view.

    The view: a pointer to the (state low, state high, inc low, inc high)
    words, then ``has_uint32`` (cleared: no half of an old draw is kept).
    """
    try:
        import ctypes

        address = bits.ctypes.state_address
        inner = ctypes.cast(address, ctypes.POINTER(ctypes.c_void_p))[0]
        if not inner:
            return None
        words = (ctypes.c_uint64 * 4).from_address(inner)
        has_uint32 = ctypes.c_int.from_address(address + ctypes.sizeof(ctypes.c_void_p))
    except Exception:  # no ctypes view: the dict path
        return None
    low = (1 << 64) - 1

    def put(state: int, inc: int) -> None:
        words[0], words[1] = state & low, state >> 64
        words[2], words[3] = inc & low, inc >> 64
        has_uint32.value = 0

    return put


@functools.cache
def _direct_writes_work() -> bool:
    """Whether :func:`_direct_setter` sets the state ``bits.state`` then reports."""
    probe = np.random.PCG64(0)
    probe.state = {
        "bit_generator": "PCG64",
        "state": {"state": 1, "inc": 3},
        "has_uint32": 1,
        "uinteger": 7,
    }
    put = _direct_setter(probe)
    if put is None:
        return False
    state, inc = (5 << 64) | 9, (11 << 64) | 13
    put(state, inc)
    got = probe.state
    return got["state"] == {"state": state, "inc": inc} and not got["has_uint32"]


def normal_rows(
    rngs: Iterator[np.random.Generator], stds: npt.ArrayLike, dim: int
) -> npt.NDArray[np.float64]:
    """Row i: the next generator's ``normal(0, stds[i], dim)``, bit for bit, (n, dim).

    Each row by :func:`normal_into`, while it is in cache.
    """
    scale = np.asarray(stds, dtype=np.float64).reshape(-1)
    out = np.empty((len(scale), int(dim)))
    for row, std in zip(out, scale.tolist(), strict=True):
        normal_into(next(rngs), std, row)
    return out


def normal_into(
    rng: np.random.Generator, std: float, out: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Fill ``out`` with ``rng.normal(0, std, out.shape)``'s draws, bit for bit.

    Standard normals, then ``0 + σ·z`` per element (the + 0 turns a −0 into +0),
    in place: no array per draw.
    """
    rng.standard_normal(out=out)
    out *= std
    out += 0.0
    return out


#: PCG64's 128-bit LCG multiplier (numpy's PCG_DEFAULT_MULTIPLIER_128).
_PCG_MULT = (2549297995355413924 << 64) + 4865540595714422341
_MASK128 = (1 << 128) - 1


def _key_rows(
    seed: npt.ArrayLike | int,
    purpose: str,
    rounds: npt.ArrayLike | int,
    clients: npt.ArrayLike | int,
) -> tuple[tuple[npt.NDArray[Any], ...], npt.NDArray[np.uint32] | None]:
    """The keys broadcast flat, and their (M, 4) uint32 rows (None: a key beyond 32 bits)."""
    pid = _purpose_id(purpose)
    arrays = np.broadcast_arrays(
        np.asarray(seed), np.asarray(rounds), np.asarray(clients)
    )
    s, r, c = (a.reshape(-1) for a in arrays)
    if len(s) and (
        min(int(a.min()) for a in (s, r, c)) < 0
        or max(int(a.max()) for a in (s, r, c)) > _MASK
    ):
        return (s, r, c), None
    keys = np.empty((len(r), 4), np.uint32)
    keys[:, 0], keys[:, 1], keys[:, 2], keys[:, 3] = s, pid, r, c
    return (s, r, c), keys


def _purpose_id(purpose: str) -> int:
    if purpose not in PURPOSES:
        raise KeyError(f"unknown rng purpose {purpose!r}; known: {sorted(PURPOSES)}")
    return PURPOSES[purpose]


# numpy's SeedSequence constants (numpy/random/bit_generator.pyx), pool size 4
_MASK = 0xFFFFFFFF
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715


def _state_words(keys: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint64]:
    """``SeedSequence(row).generate_state(4, np.uint64)`` of each row of ``keys`` (M, 4)."""
    u = np.uint32
    with np.errstate(over="ignore"):
        h = [u(_INIT_A)]

        def hashmix(v: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
            v = v ^ h[0]
            h[0] = u(h[0] * u(_MULT_A))
            v = v * h[0]
            return v ^ (v >> u(16))

        pool = [hashmix(keys[:, i]) for i in range(4)]
        for s in range(4):
            for d in range(4):
                if s != d:
                    r = u(_MIX_L) * pool[d] - u(_MIX_R) * hashmix(pool[s])
                    pool[d] = r ^ (r >> u(16))
        out = np.empty((len(keys), 8), np.uint32)
        hc = u(_INIT_B)
        for i in range(8):
            v = pool[i % 4] ^ hc
            hc = u(hc * u(_MULT_B))
            v = v * hc
            out[:, i] = v ^ (v >> u(16))
    return out.astype("<u4").view("<u8").astype(np.uint64)


class _KeySeed(ISpawnableSeedSequence):
    """A key's ``SeedSequence`` with its PCG64 state words already computed.

    ``generate_state(4, np.uint64)`` (what ``PCG64`` asks) returns the words;
    anything else (``spawn``, other sizes) goes to the real
    ``SeedSequence(key)``, made on first use.
    """

    def __init__(self, key: Sequence[int], words: npt.NDArray[np.uint64]) -> None:
        self.key = tuple(key)
        self.words = words
        self._real: np.random.SeedSequence | None = None

    def _sequence(self) -> np.random.SeedSequence:
        if self._real is None:
            self._real = np.random.SeedSequence(list(self.key))
        return self._real

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> Any:
        if n_words == 4 and np.dtype(dtype) == np.uint64:
            return self.words.copy()
        return self._sequence().generate_state(n_words, dtype)

    def spawn(self, n_children: int) -> list[np.random.SeedSequence]:  # type: ignore[override]
        return self._sequence().spawn(n_children)


def torch_seed_for(seed: int, purpose: str, *, round: int = 0, client: int = 0) -> int:
    """Return a 63-bit integer seed for a ``torch.Generator`` of the same key."""
    return int(rng_for(seed, purpose, round=round, client=client).integers(2**63 - 1))
