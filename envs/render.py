"""What ``render()`` shows for every env: the round's channel gains and schedule.

One frame is a gain table (rows: the clients, devices or candidate neighbors;
columns: the subchannels the decision assigns) in dB, and the cells the round's
schedule used, (row, column). :func:`render_ansi` prints it as text
(``render_mode="ansi"``); :func:`render_rgb` paints it as an image
(``render_mode="rgb_array"``): a heatmap in plain numpy (no plotting library),
one square per cell, dark blue (weakest gain) to yellow (strongest), grey where
a row has no such subchannel, the scheduled cells framed in red.

Implementation details:
    1. The colours are scaled per frame (weakest finite gain → 0, strongest
       → 1), so a frame shows which links are relatively good this round, not
       absolute levels; the ansi text gives the dB values.
    2. Non-finite gains (−inf: a closed subchannel, NaN: a device outside an
       edge's subnet in the hierarchy's block table) are grey and printed ``-``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["CELL_PIXELS", "RENDER_MODES", "render_ansi", "render_rgb"]

#: The render modes every env of this package accepts.
RENDER_MODES = ("ansi", "rgb_array")
#: Side of one table cell in the rgb_array image, pixels.
CELL_PIXELS = 12

_LOW = np.array([40, 30, 110], dtype=np.float64)  # dark blue: weakest gain
_HIGH = np.array([250, 230, 40], dtype=np.float64)  # yellow: strongest gain
_GREY = np.array([128, 128, 128], dtype=np.uint8)
_RED = np.array([230, 20, 20], dtype=np.uint8)


def render_ansi(
    gain_db: npt.ArrayLike,
    marks: Sequence[tuple[int, int]],
    title: str,
    row_labels: Sequence[str] | None = None,
) -> str:
    """Return the frame as text: one line per row, ``*`` after the scheduled cells.

    Args:
        gain_db: (R, C) gains, dB (non-finite: no such link).
        marks: The scheduled (row, column) cells.
        title: The first line.
        row_labels: One label per row (default: the row index).

    Example:
        >>> print(render_ansi([[-90.0, -80.5]], [(0, 1)], "round 1"))
        round 1
        row | sc0     | sc1
          0 | -90.0   | -80.5*
        schedule: 0->sc1
    """
    table = np.asarray(gain_db, dtype=np.float64)
    labels = (
        [str(r) for r in range(table.shape[0])]
        if row_labels is None
        else list(row_labels)
    )
    width = max([3, *(len(s) for s in labels)])
    marked = set(marks)
    lines = [
        title,
        f"{'row':>{width}} | "
        + " | ".join(f"{f'sc{c}':<7}" for c in range(table.shape[1])).rstrip(),
    ]
    for r, label in enumerate(labels):
        cells = [
            (f"{table[r, c]:.1f}" if np.isfinite(table[r, c]) else "-")
            + ("*" if (r, c) in marked else " ")
            for c in range(table.shape[1])
        ]
        lines.append(
            f"{label:>{width}} | " + " | ".join(f"{s:<7}" for s in cells).rstrip()
        )
    schedule = ", ".join(f"{labels[r]}->sc{c}" for r, c in sorted(marked))
    lines.append(f"schedule: {schedule or '(none)'}")
    return "\n".join(lines)


def render_rgb(
    gain_db: npt.ArrayLike, marks: Sequence[tuple[int, int]]
) -> npt.NDArray[np.uint8]:
    """Return the frame as an (R·s, C·s, 3) uint8 image, s = :data:`CELL_PIXELS`.

    Args:
        gain_db: (R, C) gains, dB (non-finite: grey).
        marks: The scheduled (row, column) cells, framed in red.

    Example:
        >>> image = render_rgb([[-90.0, -80.0]], [(0, 1)])
        >>> image.shape, image.dtype.name
        ((12, 24, 3), 'uint8')
        >>> image[6, 6].tolist(), image[0, 12].tolist()  # weakest cell; a red frame
        ([40, 30, 110], [230, 20, 20])
    """
    table = np.asarray(gain_db, dtype=np.float64)
    finite = np.isfinite(table)
    level = np.zeros_like(table)
    if finite.any():
        low, high = table[finite].min(), table[finite].max()
        level[finite] = (table[finite] - low) / max(high - low, 1e-12)
    colours = _LOW + level[..., None] * (_HIGH - _LOW)
    cells = np.where(finite[..., None], np.rint(colours), _GREY).astype(np.uint8)
    s = CELL_PIXELS
    image = np.repeat(np.repeat(cells, s, axis=0), s, axis=1)
    for r, c in marks:
        block = image[r * s : (r + 1) * s, c * s : (c + 1) * s]
        block[:2], block[-2:], block[:, :2], block[:, -2:] = _RED, _RED, _RED, _RED
    return image
