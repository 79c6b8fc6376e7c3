"""Uplink compression: payloads, uniform quantization and sparsification."""

from rayfl.compression.config import CompressionConfig
from rayfl.compression.payload import Payload
from rayfl.compression.quantize import (
    code_dtype,
    dequantize,
    minmax_range,
    quantize,
    quantize_codes,
    quantize_step,
    uplink_range,
)
from rayfl.compression.sparsify import random_sparsify, topk_count, topk_sparsify

__all__ = [
    "CompressionConfig",
    "Payload",
    "code_dtype",
    "dequantize",
    "minmax_range",
    "quantize",
    "quantize_codes",
    "quantize_step",
    "random_sparsify",
    "topk_count",
    "topk_sparsify",
    "uplink_range",
]
