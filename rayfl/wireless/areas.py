"""The areas devices move in: a disk (the star's cell) or a square (a D2D network).

A moving model (:mod:`rayfl.wireless.walks`) asks its area for two things:
a point uniform in it from two uniforms, and a straight move that bounces
specularly off its edge.

| area | uniform point from (u, v) ∈ [0, 1)² | edge |
|---|---|---|
| :class:`Disk` (radius R, centre 0) | R·√u·(cos 2πv, sin 2πv) | circle: :func:`reflect_in_disk` |
| :class:`Square` (side L, corner 0) | L·(u, v) | [0, L]²: :func:`reflect_in_square` |

A bounce maps any direction angle θ to offset + sign·θ: off a wall whose
normal has angle φ, θ ↦ 2φ + π − θ (φ = 0 for the square's vertical walls, so
θ ↦ π − θ; φ = π/2 for its horizontal ones, θ ↦ −θ mod 2π).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

__all__ = ["Area", "Disk", "Square", "reflect_in_disk", "reflect_in_square"]

FloatArray = npt.NDArray[np.float64]


class Area(Protocol):
    """Where devices move: uniform points and bounces off the edge."""

    def uniform(self, u: FloatArray) -> FloatArray:
        """Map (n, 2) uniforms on [0, 1)² to (n, 2) points uniform in the area."""
        ...

    def reflect(
        self, position: FloatArray, displacement: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Move ``position`` by ``displacement``, bouncing; (end, sign, offset)."""
        ...


class Disk:
    """The disk of radius ``radius_m`` around the origin (the star's cell)."""

    def __init__(self, radius_m: float) -> None:
        self.radius_m = float(radius_m)

    def uniform(self, u: FloatArray) -> FloatArray:
        """R·√u₀ at angle 2π·u₁: uniform in the disk."""
        r = self.radius_m * np.sqrt(u[:, 0])
        angle = 2.0 * np.pi * u[:, 1]
        out: FloatArray = r[:, None] * np.stack([np.cos(angle), np.sin(angle)], 1)
        return out

    def reflect(
        self, position: FloatArray, displacement: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """:func:`reflect_in_disk` in this disk."""
        return reflect_in_disk(position, displacement, self.radius_m)


class Square:
    """The square [0, ``side_m``]² (a D2D network's area, seed_003 §2.2)."""

    def __init__(self, side_m: float) -> None:
        self.side_m = float(side_m)

    def uniform(self, u: FloatArray) -> FloatArray:
        """L·(u₀, u₁): uniform in the square."""
        out: FloatArray = self.side_m * np.asarray(u[:, :2], dtype=np.float64)
        return out

    def reflect(
        self, position: FloatArray, displacement: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """:func:`reflect_in_square` in this square."""
        return reflect_in_square(position, displacement, self.side_m)


def reflect_in_disk(
    position: FloatArray, displacement: FloatArray, radius: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Move points by ``displacement`` inside a disk, bouncing specularly off its edge.

    Args:
        position: (n, 2) starting points, inside the disk.
        displacement: (n, 2) straight moves, m.
        radius: The disk's radius, m.

    Returns:
        ``(end, sign, offset)``: the (n, 2) end points, and the map θ ↦
        offset + sign·θ that the bounces apply to any direction angle (each
        bounce at normal angle φ maps θ to 2φ + π − θ).

    Example:
        >>> end, sign, _ = reflect_in_disk(np.zeros((1, 2)), np.array([[3.0, 0]]), 2.0)
        >>> end.round(9).tolist(), sign.tolist()
        ([[1.0, 0.0]], [-1.0])
    """
    end = np.array(position, dtype=np.float64)
    left = np.array(displacement, dtype=np.float64)
    sign, offset = np.ones(len(end)), np.zeros(len(end))
    for _ in range(10_000):
        hit = np.hypot(*(end + left).T) > radius
        if not hit.any():
            return end + left, sign, offset
        p, v = end[hit], left[hit]
        a = (v * v).sum(axis=1)
        b = 2.0 * (p * v).sum(axis=1)
        c = np.minimum((p * p).sum(axis=1) - radius**2, 0.0)
        s = (-b + np.sqrt(b * b - 4.0 * a * c)) / (2.0 * a)  # the exit, in (0, 1)
        wall = p + s[:, None] * v
        normal = wall / np.hypot(*wall.T)[:, None]
        rest = (1.0 - s)[:, None] * v
        end[hit] = wall * (1.0 - 1e-12)
        left[hit] = rest - 2.0 * (rest * normal).sum(axis=1)[:, None] * normal
        offset[hit] = 2.0 * np.arctan2(normal[:, 1], normal[:, 0]) + np.pi - offset[hit]
        sign[hit] = -sign[hit]
    raise RuntimeError(
        "reflect_in_disk did not converge: a move crosses the disk 10^4 times"
    )


def reflect_in_square(
    position: FloatArray, displacement: FloatArray, side: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Move points by ``displacement`` inside [0, side]², bouncing specularly.

    Each coordinate folds back into [0, side] (a triangle wave of period
    2·side); k bounces off the vertical walls flip the x component of the
    direction k times, so only k's parity matters (likewise y).

    Args:
        position: (n, 2) starting points, in the square.
        displacement: (n, 2) straight moves, m.
        side: The square's side, m.

    Returns:
        ``(end, sign, offset)`` as :func:`reflect_in_disk`: θ ↦ offset + sign·θ
        (θ ↦ π − θ for an odd number of x bounces, then θ ↦ −θ for an odd
        number of y bounces).

    Example:
        >>> end, sign, offset = reflect_in_square(
        ...     np.array([[1.0, 1.0]]), np.array([[2.0, 0.5]]), 2.0)
        >>> end.tolist(), sign.tolist(), offset.tolist()
        ([[1.0, 1.5]], [-1.0], [3.141592653589793])
    """
    moved = np.asarray(position, dtype=np.float64) + np.asarray(
        displacement, dtype=np.float64
    )
    period = np.mod(moved, 2.0 * side)
    end = np.where(period > side, 2.0 * side - period, period)
    odd = np.mod(np.floor(moved / side), 2.0) == 1.0  # (n, 2): an odd bounce count
    sign = np.where(odd[:, 0] != odd[:, 1], -1.0, 1.0)
    # x: θ ↦ π − θ; then y: θ ↦ −θ, i.e. π − θ ↦ θ − π (mod 2π: θ + π)
    offset = np.where(odd[:, 0], np.pi, 0.0)
    offset = np.where(odd[:, 1], -offset, offset)
    return end, sign, offset
