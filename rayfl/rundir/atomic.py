"""Atomic file writes, and the one-line error of a full disk.

Every file a run writes goes through :func:`atomic_write`: the content is
written to a temporary name beside the target, then renamed over it, so a
reader (or a resumed run) sees the old file or the new one, never a truncated
one. When the disk is full the temporary file is removed and
:class:`DiskFullError` names the file and the space left.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["DiskFullError", "atomic_write", "disk_full", "human_bytes"]

_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
# pyarrow raises an OSError whose errno is unset; its text names the cause
_FULL_TEXTS = ("No space left on device", "Disk quota exceeded", "[errno 28]")


class DiskFullError(OSError):
    """No space (or quota) left on the device while writing ``path``.

    Its text is one line naming the file and the free space, e.g.
    ``no space left on device for runs/a/summary.json (0 B free on /mnt/runs)``.

    Attributes:
        path: The file that could not be written.
        free_bytes: Free space on its filesystem after the partial file was
            removed (None if unknown).
        mount: The mount point of that filesystem.
    """

    def __init__(self, path: Path, free_bytes: int | None, mount: Path) -> None:
        self.path, self.free_bytes, self.mount = Path(path), free_bytes, mount
        free = "?" if free_bytes is None else human_bytes(free_bytes)
        self.text = f"no space left on device for {path} ({free} free on {mount})"
        super().__init__(errno.ENOSPC, self.text, str(path))

    def __str__(self) -> str:
        return self.text

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.path, self.free_bytes, self.mount))


def human_bytes(n: int) -> str:
    """Return ``n`` bytes in B, KiB, MiB, GiB or TiB, one decimal.

    Example:
        >>> human_bytes(0), human_bytes(1536), human_bytes(5 * 2**30)
        ('0 B', '1.5 KiB', '5.0 GiB')
    """
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"


def _mount_point(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


def disk_full(error: BaseException, path: Path) -> DiskFullError | None:
    """Return ``error`` as a :class:`DiskFullError` on ``path``; None if another error.

    An error is a full disk when its errno is ENOSPC or EDQUOT, or (pyarrow,
    which leaves errno unset) when its text says so.
    """
    if isinstance(error, DiskFullError):
        return error
    if not isinstance(error, OSError):
        return None
    if error.errno not in _FULL_ERRNOS and not any(
        text.lower() in str(error).lower() for text in _FULL_TEXTS
    ):
        return None
    mount = _mount_point(Path(path).parent)
    try:
        free: int | None = shutil.disk_usage(mount).free
    except OSError:
        free = None
    return DiskFullError(Path(path), free, mount)


def _file_mode() -> int:
    """The mode of a plain new file: 0666 less the process's umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


_FILE_MODE = _file_mode()


def atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    """Call ``write(tmp)`` on a temporary path beside ``path``, then rename it.

    On any error the temporary file is removed and ``path`` is left as it was.

    Raises:
        DiskFullError: If the disk (or the quota) is full; chained to the
            original error.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as error:
        full = disk_full(error, path)
        if full is None:
            raise
        raise full from error
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, _FILE_MODE)  # mkstemp's 0600 would hide the results
        os.replace(tmp, path)
    except BaseException as error:
        Path(tmp).unlink(missing_ok=True)
        full = disk_full(error, path)
        if full is None:
            raise
        raise full from error
