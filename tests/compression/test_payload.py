from __future__ import annotations

import math

import numpy as np
import pytest

from rayfl.compression.payload import Payload
from rayfl.compression.quantize import quantize
from rayfl.compression.sparsify import topk_sparsify


def test_dense_payload_is_32_bits_per_element() -> None:
    payload = Payload.dense(np.arange(7, dtype=np.float64))
    assert payload.payload_bits == 32 * 7
    assert payload.to_dense().dtype == np.float32


def test_dense_quantized_payload_is_r_bits_per_element() -> None:
    payload = quantize(np.zeros(1000), lo=-1.0, hi=1.0, bits=16)
    assert payload.payload_bits == 16 * 1000


@pytest.mark.parametrize(
    ("dim", "kept", "bits"),
    [(1024, 10, None), (1024, 500, None), (1000, 50, 8), (2, 1, 4)],
    ids=["index-list", "bitmap", "quantized-list", "tiny"],
)
def test_sparse_payload_adds_cheaper_of_index_list_and_bitmap(
    dim: int, kept: int, bits: int | None
) -> None:
    # Arrange
    vector = np.zeros(dim, dtype=np.float32)
    vector[:kept] = np.arange(1, kept + 1)
    sparse = topk_sparsify(vector, keep_fraction=kept / dim)
    payload = (
        sparse if bits is None else quantize(sparse, lo=0.0, hi=float(kept), bits=bits)
    )
    # Act
    total = payload.payload_bits
    # Assert: seed 002 §2.3 counts 32 s d + d (bitmap)
    value_bits = kept * (32 if bits is None else bits)
    assert total == value_bits + min(kept * math.ceil(math.log2(dim)), dim)


def test_with_codes_flips_map_to_levels_and_keep_r_bits() -> None:
    # Arrange: R = 4 over [0, 15] has step 1, so code k decodes to k
    payload = quantize(np.array([3.0, 8.0]), lo=0.0, hi=15.0, bits=4)
    assert payload.codes is not None
    # Act: flip the MSB of the first code; set a bit above R in the second
    flipped = payload.codes ^ np.array([0b1000, 0b1_0000], dtype=np.uint8)
    corrupted = payload.with_codes(flipped)
    # Assert
    assert corrupted.codes is not None
    assert corrupted.codes.tolist() == [11, 8]
    assert corrupted.to_dense().tolist() == [11.0, 8.0]
    assert payload.to_dense().tolist() == [3.0, 8.0]  # original untouched


def test_sparse_to_dense_applies_scale_at_indices() -> None:
    payload = Payload(
        dim=5,
        values=np.array([1.0, -2.0], np.float32),
        indices=np.array([0, 3], np.int32),
        scale=2.0,
    )
    assert payload.to_dense().tolist() == [2.0, 0.0, 0.0, -4.0, 0.0]


def test_inconsistent_fields_raise() -> None:
    with pytest.raises(ValueError, match=r"payload.values must have shape \(3,\)"):
        Payload(dim=3, values=np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="unsigned"):
        Payload(
            dim=1,
            values=np.zeros(1, np.float32),
            codes=np.zeros(1, np.int16),
            lo=0.0,
            hi=1.0,
            bits_per_element=4,
        )
    with pytest.raises(ValueError, match="quantized payload"):
        Payload.dense([1.0]).with_codes(np.zeros(1, np.uint8))
