from __future__ import annotations

import pydantic
import pytest
from pydantic import BaseModel

from rayfl.compression.config import CompressionConfig


class _Root(BaseModel):
    compression: CompressionConfig


def test_defaults_are_no_compression() -> None:
    config = CompressionConfig()
    assert config.quantize_bits is None
    assert config.sparsify_fraction == 1.0
    assert config.quantize_range == "clip"
    assert not config.stochastic and not config.topk and config.sparsify_rescale


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "quantize_bits",
            0,
            r"compression.quantize_bits must be an integer in \[1, 32\] or null, got 0",
        ),
        (
            "quantize_bits",
            33,
            r"compression.quantize_bits must be an integer in \[1, 32\] or null, "
            r"got 33",
        ),
        (
            "sparsify_fraction",
            0.0,
            r"compression.sparsify_fraction must be in \(0, 1\], got 0.0",
        ),
        (
            "sparsify_fraction",
            1.5,
            r"compression.sparsify_fraction must be in \(0, 1\], got 1.5",
        ),
    ],
    ids=["bits-0", "bits-33", "fraction-0", "fraction-1.5"],
)
def test_bad_values_name_field_and_value(
    field: str, value: object, message: str
) -> None:
    # Act
    with pytest.raises(pydantic.ValidationError, match=message) as info:
        _Root(compression={field: value})
    # Assert: the error path names the section
    assert info.value.errors()[0]["loc"][0] == "compression"


def test_unknown_range_mode_lists_allowed_values() -> None:
    with pytest.raises(pydantic.ValidationError, match="'clip' or 'minmax'"):
        CompressionConfig(quantize_range="fixed")


def test_config_is_frozen_and_forbids_extra_fields() -> None:
    config = CompressionConfig(quantize_bits=8)
    with pytest.raises(pydantic.ValidationError):
        config.quantize_bits = 4  # type: ignore[misc]
    with pytest.raises(
        pydantic.ValidationError, match="Extra inputs are not permitted"
    ):
        CompressionConfig(bits=8)  # type: ignore[call-arg]
