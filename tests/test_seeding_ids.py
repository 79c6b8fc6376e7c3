"""Every random purpose has its own stream id (parallel work once reused 15)."""

from rayfl.seeding import PURPOSES


def test_purpose_ids_are_unique():
    ids = list(PURPOSES.values())
    duplicated = {v for v in ids if ids.count(v) > 1}
    assert not duplicated, {k: v for k, v in PURPOSES.items() if v in duplicated}
