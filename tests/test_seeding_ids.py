"""Every random purpose has its own stream id (parallel work once reused 15)."""

import numpy as np
import pytest

from rayfl.seeding import PURPOSES


def test_purpose_ids_are_unique():
    ids = list(PURPOSES.values())
    duplicated = {v for v in ids if ids.count(v) > 1}
    assert not duplicated, {k: v for k, v in PURPOSES.items() if v in duplicated}


def test_rng_for_is_numpy_default_rng_of_the_key() -> None:
    """rng_for builds the generator by hand (faster): the stream of default_rng(key)."""
    from rayfl.seeding import PURPOSES, rng_for

    for seed, purpose, t, client in [(0, "batch", 0, 0), (2**31 - 1, "channel", 19, 7)]:
        key = [seed, PURPOSES[purpose], t, client]
        ours, numpy_s = (
            rng_for(seed, purpose, round=t, client=client),
            np.random.default_rng(key),
        )
        assert ours.bit_generator.state == numpy_s.bit_generator.state
        assert ours.random(4).tolist() == numpy_s.random(4).tolist()


def _edge_keys() -> list[tuple[int, int, int]]:
    """(seed, round, client) keys: zeros, 32-bit edges, random ones, and beyond 32 bits."""
    rng = np.random.default_rng(5)
    keys = [
        (0, 0, 0),
        (2**32 - 1, 2**32 - 1, 2**32 - 1),
        (1, 0, 2**32 - 1),
        (2**32, 3, 4),
    ]
    keys += [tuple(int(v) for v in rng.integers(0, 2**32, 3)) for _ in range(200)]
    keys += [tuple(int(v) for v in rng.integers(0, 50, 3)) for _ in range(50)]
    return keys


def test_rng_for_and_rng_for_many_draw_default_rngs_stream_on_every_key() -> None:
    """The hand-made seeding (SeedSequence's hash as integer/array arithmetic) equals numpy's."""
    from rayfl.seeding import PURPOSES, rng_for, rng_for_many

    keys = _edge_keys()
    for purpose in ("batch", "cpu_frequency"):
        for seed in {k[0] for k in keys[:6]}:
            rounds = np.array([k[1] for k in keys], np.int64)
            clients = np.array([k[2] for k in keys], np.int64)
            many = rng_for_many(seed, purpose, rounds=rounds, clients=clients)
            for gen, t, client in zip(
                many, rounds.tolist(), clients.tolist(), strict=True
            ):
                ref = np.random.default_rng([seed, PURPOSES[purpose], t, client])
                one = rng_for(seed, purpose, round=t, client=client)
                want = ref.integers(2**63, size=3).tolist()
                assert gen.integers(2**63, size=3).tolist() == want
                assert one.integers(2**63, size=3).tolist() == want
    # one seed per key (lanes of different seeds), beyond 32 bits included
    seeds = np.array([k[0] for k in keys], np.int64)
    per_key = rng_for_many(seeds, "batch", rounds=[k[1] for k in keys], clients=5)
    for gen, (seed, t, _) in zip(per_key, keys, strict=True):
        ref = np.random.default_rng([seed, PURPOSES["batch"], t, 5])
        assert gen.random(2).tolist() == ref.random(2).tolist()


def test_rng_for_many_broadcasts_and_keeps_spawn_and_pickling() -> None:
    import pickle

    from rayfl.seeding import PURPOSES, rng_for, rng_for_many

    gens = rng_for_many(3, "channel", rounds=7, clients=[0, 1, 2])
    assert len(gens) == 3
    assert rng_for_many(3, "channel", rounds=[], clients=[]) == []
    for client, gen in enumerate(gens):
        ref = np.random.default_rng([3, PURPOSES["channel"], 7, client])
        # spawn (used by some algorithms) gives SeedSequence's children
        assert [c.random() for c in gen.spawn(2)] == [c.random() for c in ref.spawn(2)]
        assert gen.random() == ref.random()
        copy = pickle.loads(pickle.dumps(gen))
        assert copy.random() == gen.random()
    try:
        rng_for_many(3, "no such purpose", rounds=[1])
    except KeyError:
        pass
    else:
        raise AssertionError("an unknown purpose must raise")
    assert rng_for(3, "batch", round=2**40).random() == (
        np.random.default_rng([3, PURPOSES["batch"], 2**40, 0]).random()
    )


def test_rng_reseeded_draws_rng_for_manys_streams_key_by_key() -> None:
    """Each key's turn of the one reseeded generator draws its rng_for_many stream."""
    from rayfl.seeding import rng_for_many, rng_reseeded

    # Arrange: edge keys (a seed per key, beyond 32 bits included) and plain keys
    keys = _edge_keys()
    seeds = np.array([k[0] for k in keys], np.int64)
    rounds = np.array([k[1] for k in keys], np.int64)
    clients = np.array([k[2] for k in keys], np.int64)
    small = (seeds <= 2**32 - 1) & (rounds <= 2**32 - 1) & (clients <= 2**32 - 1)
    cases = [
        (seeds, rounds, clients),  # a key beyond 32 bits: rng_for_many's own path
        (seeds[small], rounds[small], clients[small]),
        (np.repeat(np.arange(5), 4), 7, np.tile(np.arange(4), 5)),
    ]
    for purpose in ("hier_subchannel_fading", "hier_device_noise"):
        for s, r, c in cases:
            # Act
            got = [
                (g.exponential(1.0, size=2), g.normal(0.0, 0.5, size=33))
                for g in rng_reseeded(s, purpose, rounds=r, clients=c)
            ]
            # Assert
            want = [
                (g.exponential(1.0, size=2), g.normal(0.0, 0.5, size=33))
                for g in rng_for_many(s, purpose, rounds=r, clients=c)
            ]
            assert len(got) == len(want)
            for (a, b), (x, y) in zip(got, want, strict=True):
                assert a.tolist() == x.tolist()
                assert b.tolist() == y.tolist()
    assert list(rng_reseeded(3, "batch", rounds=[], clients=[])) == []


@pytest.mark.parametrize("direct", [True, False])
def test_rng_reseeded_sets_the_state_directly_or_by_dict(monkeypatch, direct) -> None:
    """Both state setters give rng_for_many's streams, a buffered uint32 dropped."""
    import rayfl.seeding as seeding

    assert seeding._direct_writes_work()  # this platform takes the direct writes
    if not direct:
        monkeypatch.setattr(seeding, "_direct_setter", lambda bits: None)
    s, r, c = np.repeat(np.arange(6), 5), 4, np.tile(np.arange(5), 6)

    def draws(gens):
        # an int32 draw leaves half a uint64 buffered (has_uint32) for the next
        return [
            (
                int(g.integers(0, 1000, dtype=np.int32)),
                g.standard_exponential(3).tolist(),
            )
            for g in gens
        ]

    got = draws(seeding.rng_reseeded(s, "batch", rounds=r, clients=c))
    assert got == draws(seeding.rng_for_many(s, "batch", rounds=r, clients=c))
