"""IDX files: the binary format of MNIST and Fashion-MNIST, parsed with numpy only.

Format (LeCun et al., http://yann.lecun.com/exdb/mnist/): a 4-byte magic number
``0x00 0x00 <dtype code> <ndim>``, then ``ndim`` big-endian uint32 dimensions, then
the values in C order. Image files have magic 2051 (uint8, 3 dims ``(n, rows, cols)``),
label files 2049 (uint8, 1 dim ``(n,)``). Files may be gzip-compressed (``.gz``).

The functions here raise plain ``ValueError`` / ``FileNotFoundError`` naming the file;
``rayfl.data.datasets`` turns them into ``DatasetError`` with install hints.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

#: IDX dtype code → numpy dtype (values are big-endian).
IDX_DTYPES: dict[int, str] = {
    0x08: "u1",
    0x09: "i1",
    0x0B: ">i2",
    0x0C: ">i4",
    0x0D: ">f4",
    0x0E: ">f8",
}

#: The four files of an MNIST-style dataset: split → (images stem, labels stem).
IDX_FILES: dict[str, tuple[str, str]] = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def parse_idx(data: bytes, *, source: str) -> npt.NDArray[np.generic]:
    """Parse the bytes of one (already decompressed) IDX file.

    Args:
        data: The whole file content.
        source: Name used in error messages (usually the file path).

    Returns:
        The array with the dims in the header, native byte order.

    Raises:
        ValueError: Bad magic number, unknown dtype code, or a length that does not
            match the header dims (truncated or trailing bytes); names ``source``.

    Example:
        >>> header = bytes([0, 0, 0x08, 1]) + (3).to_bytes(4, "big")
        >>> parse_idx(header + bytes([7, 8, 9]), source="labels").tolist()
        [7, 8, 9]
    """
    if len(data) < 4:
        raise ValueError(f"{source}: not an IDX file (only {len(data)} bytes)")
    if data[0] != 0 or data[1] != 0:
        magic = int.from_bytes(data[:4], "big")
        raise ValueError(
            f"{source}: bad IDX magic number {magic} (0x{magic:08x}); expected "
            "0x0000TTDD (2049 for labels, 2051 for images)"
        )
    dtype_code, ndim = data[2], data[3]
    if dtype_code not in IDX_DTYPES:
        raise ValueError(f"{source}: unknown IDX dtype code 0x{dtype_code:02x}")
    if ndim == 0:
        raise ValueError(f"{source}: IDX header declares 0 dimensions")
    header_len = 4 + 4 * ndim
    if len(data) < header_len:
        raise ValueError(f"{source}: truncated IDX header ({len(data)} bytes)")
    dims = tuple(
        int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)
    )
    dtype = np.dtype(IDX_DTYPES[dtype_code])
    expected = header_len + int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    if len(data) != expected:
        kind = "truncated" if len(data) < expected else "has trailing bytes"
        raise ValueError(
            f"{source}: IDX file {kind}: header dims {dims} need {expected} bytes, "
            f"file has {len(data)}"
        )
    array = np.frombuffer(data, dtype=dtype, offset=header_len).reshape(dims)
    return array.astype(dtype.newbyteorder("="), copy=False)


def read_idx(path: Path) -> npt.NDArray[np.generic]:
    """Read one IDX file, gzip-compressed if its name ends with ``.gz``.

    Args:
        path: The file.

    Returns:
        The parsed array (see ``parse_idx``).

    Raises:
        ValueError: Corrupt gzip stream or malformed IDX content; names the file.
    """
    raw = path.read_bytes()
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as error:
            raise ValueError(f"{path}: corrupt gzip stream ({error})") from error
    return parse_idx(raw, source=str(path))


def _find_file(directory: Path, stem: str) -> Path | None:
    """Return ``directory/stem`` or ``directory/stem.gz``, preferring uncompressed."""
    for name in (stem, f"{stem}.gz"):
        candidate = directory / name
        if candidate.is_file():
            return candidate
    return None


def find_idx_dir(candidates: Sequence[Path]) -> Path | None:
    """Return the first directory holding all four MNIST-style IDX files.

    Args:
        candidates: Directories to search, in order.

    Returns:
        The first directory where every file of ``IDX_FILES`` exists (raw or
        ``.gz``), or None.
    """
    stems = [stem for pair in IDX_FILES.values() for stem in pair]
    for directory in candidates:
        if all(_find_file(directory, stem) is not None for stem in stems):
            return directory
    return None


def read_idx_split(
    directory: Path, split: str
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    """Read and cross-check the images and labels of one split.

    Args:
        directory: A directory accepted by ``find_idx_dir``.
        split: "train" or "test".

    Returns:
        ``images (n, rows, cols) uint8`` and ``labels (n,) uint8``.

    Raises:
        ValueError: Missing file, wrong dtype/ndim, or image/label counts differ.
    """
    found: dict[str, Path] = {}
    for stem in IDX_FILES[split]:
        path = _find_file(directory, stem)
        if path is None:
            raise ValueError(f"{directory / stem}[.gz]: file not found")
        found[stem] = path
    images_path, labels_path = (found[stem] for stem in IDX_FILES[split])
    images, labels = read_idx(images_path), read_idx(labels_path)
    for path, array, ndim in ((images_path, images, 3), (labels_path, labels, 1)):
        if array.dtype != np.uint8 or array.ndim != ndim:
            raise ValueError(
                f"{path}: expected {ndim}-D uint8 IDX data, got {array.ndim}-D "
                f"{array.dtype} with shape {array.shape}"
            )
    if images.shape[0] != labels.shape[0]:
        raise ValueError(
            f"{images_path} has {images.shape[0]} images but {labels_path} has "
            f"{labels.shape[0]} labels"
        )
    return images.astype(np.uint8, copy=False), labels.astype(np.uint8, copy=False)
