"""The compact per-actor client state store (rayfl.actors.state)."""

import numpy as np
import pytest

from rayfl.actors.state import ClientStateStore


def _vec(value, n=5):
    return np.full(n, value, np.float32)


def test_vectors_share_one_array_and_read_back():
    store = ClientStateStore([3, 7, 11])
    store[7]["personal"] = _vec(1.0)
    store[11]["personal"] = _vec(2.0)
    assert store.arrays["personal"].shape == (3, 5)
    assert store.nbytes() == 3 * 5 * 4
    np.testing.assert_array_equal(store[7]["personal"], _vec(1.0))
    np.testing.assert_array_equal(store[11]["personal"], _vec(2.0))
    assert "personal" not in store[3] and store[3].get("personal") is None
    assert set(store[7]) == {"personal"} and len(store[7]) == 1


def test_assignment_copies_and_views_are_read_only():
    store = ClientStateStore([0])
    value = _vec(1.0)
    store[0]["personal"] = value
    value[:] = 9.0  # the caller's array is not the stored one
    got = store[0]["personal"]
    assert got[0] == 1.0
    with pytest.raises(ValueError):
        got[0] = 5.0


def test_non_vectors_and_other_shapes_go_to_the_dict():
    store = ClientStateStore([0, 1])
    store[0]["personal"] = _vec(1.0)
    store[0]["steps"] = 3
    store[1]["personal"] = np.ones(7, np.float32)  # other width: not in the array
    store[1]["f64"] = np.ones(5)
    assert store[0]["steps"] == 3
    assert store[1]["personal"].shape == (7,)
    assert "f64" not in store.arrays and store[1]["f64"].dtype == np.float64
    store[0]["steps"] = store[0].get("steps", 0) + 1
    assert store[0]["steps"] == 4
    del store[0]["personal"]
    assert "personal" not in store[0]
    with pytest.raises(KeyError):
        del store[0]["personal"]


def test_export_load_round_trip_and_export_is_a_copy():
    store = ClientStateStore([2, 5, 8])
    store[2]["personal"] = _vec(1.0)
    store[2]["n"] = 1
    store[8]["personal"] = _vec(3.0)
    saved = store.export()
    assert set(saved) == {2, 8}  # clients without state are left out
    store[2]["personal"] = _vec(4.0)
    assert saved[2]["personal"][0] == 1.0  # the snapshot did not move
    other = ClientStateStore([8, 2, 99])  # another packing of the same clients
    other.load({**saved, 5: {"n": 2}})  # 5 is not hosted there: ignored
    assert other.export().keys() == {2, 8}
    np.testing.assert_array_equal(other[8]["personal"], _vec(3.0))
    assert other[2]["n"] == 1


def test_a_vector_replaced_by_a_scalar_disappears_from_the_array():
    store = ClientStateStore([0])
    store[0]["x"] = _vec(1.0)
    store[0]["x"] = 2.5
    assert store[0]["x"] == 2.5 and list(store[0]) == ["x"]
