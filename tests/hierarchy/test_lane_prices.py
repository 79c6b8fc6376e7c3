"""The lanes' batched upload pricing equals ``device_rows``' pricing lane by lane."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from rayfl.hierarchy.lanes_round import price_lanes
from rayfl.hierarchy.scheduling import upload_fading


class _Tables:
    """A scheduling stand-in: one random fading table per key (device x 3)."""

    num_subchannels = (3, 2, 3)

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.tables: dict[int, np.ndarray] = {}

    def fading_key(self, k: int, period: int) -> int:
        return 100 * k + period

    def draw(self, key: int) -> np.ndarray:
        if key not in self.tables:
            self.tables[key] = self.rng.exponential(1.0, size=(12, 3))
        return self.tables[key]

    def fading(self, key: int, device: int, num_subchannels: int) -> np.ndarray:
        return self.draw(key)[device, :num_subchannels]


class _Cost:
    """An elementwise price of each upload (device id and fading)."""

    def uploads(self, devices, fading):
        time_s = 1.0 / np.log2(1.0 + np.asarray(fading)) + np.asarray(devices)
        return time_s, 0.25 * time_s


def _lane(seed: int) -> tuple[SimpleNamespace, SimpleNamespace]:
    rng = np.random.default_rng(seed)
    subnets = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    calls, records = [], []
    subchannel = {}
    for p in (4, 5):
        for c, members in enumerate(subnets):
            mine = sorted(rng.choice(members, size=2, replace=False).tolist())
            for i in mine:
                subchannel[i] = int(rng.integers(_Tables.num_subchannels[c]))
            calls.append((c, p, mine, None))
            records.append(None if rng.random() < 0.2 else [{} for _ in mine])
    plan = SimpleNamespace(k=3, subchannel=subchannel)
    done = SimpleNamespace(
        plan=plan, sent=SimpleNamespace(device_calls=calls), devices=records
    )
    run = SimpleNamespace(scheduling=_Tables(seed), config=SimpleNamespace(seed=seed))
    return run, done


def test_price_lanes_equals_each_lanes_own_pricing() -> None:
    # Arrange: four lanes, some calls lost (records None)
    lanes = [_lane(seed) for seed in range(4)]
    shared = SimpleNamespace(cost=_Cost())
    # Act
    got = price_lanes(shared, lanes)
    # Assert: device_rows' pricing of each lane (upload_fading per call)
    for (run, done), (time_s, energy_j) in zip(lanes, got, strict=True):
        devices, fading = [], []
        for (c, p, mine, _), recs in zip(
            done.sent.device_calls, done.devices, strict=True
        ):
            if recs is not None:
                devices += mine
                fading.append(
                    upload_fading(
                        run.scheduling,
                        done.plan.subchannel,
                        seed=0,
                        k=done.plan.k,
                        edge=c,
                        period=p,
                        devices=mine,
                    )
                )
        want_t, want_e = _Cost().uploads(devices, np.concatenate(fading))
        assert time_s.tolist() == want_t.tolist()
        assert energy_j.tolist() == want_e.tolist()
