"""A small tmpfs under the store's folder, and a ballast file that fills it: a disk that can be made full.

Why a filesystem of its own: ``chmod`` does not stop root (this machine's soak runs as root), and a
running SQLite process writes through descriptors it already holds, so a read-only folder would
inject nothing. A full filesystem does: every write that needs a new block fails with ``ENOSPC``,
which SQLite answers with ``SQLITE_FULL`` ("database or disk is full"). The database file, its
``-wal`` and its ``-shm`` all live beside each other, so all three are on the tmpfs.

Mounting needs root (or ``CAP_SYS_ADMIN``); ``mount`` says why it cannot, and the caller reports
that instead of pretending the fault ran. A mount is always taken down again (``unmount`` falls back
to a lazy unmount when a process still holds a file there), also when the run fails.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from pathlib import Path

__all__ = ["BALLAST", "drain", "fill", "is_mounted", "mount", "unmount"]

BALLAST = ".ballast"
"""The name of the file that fills the filesystem (in its root)."""
_CHUNKS = (1 << 20, 64 << 10, 4 << 10)


def is_mounted(path: Path) -> bool:
    """Whether ``path`` is the mount point of a filesystem of its own."""
    return os.path.ismount(path)


def mount(path: Path, size_bytes: int) -> str | None:
    """Mount a tmpfs of ``size_bytes`` on ``path`` (made if missing); ``None`` once mounted, else why not.

    The reason is the ``mount`` command's own message (not root, no ``mount`` binary, a kernel
    that refuses), for the run's report; nothing is raised for a refusal.
    """
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return f"mounting a tmpfs needs root (running as uid {os.geteuid()})"
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0755", "tmpfs", str(path)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"mount could not run: {exc}"
    if done.returncode != 0:
        return f"mount -t tmpfs refused (exit {done.returncode}): {(done.stderr or done.stdout).strip()}"
    if not is_mounted(path):
        return f"mount -t tmpfs exited 0 but {path} is not a mount point"
    return None


def unmount(path: Path) -> None:
    """Take the tmpfs on ``path`` down (lazily if a process still holds a file there); a no-op if none."""
    if not is_mounted(path):
        return
    done = subprocess.run(["umount", str(path)], capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0 and is_mounted(path):
        # Busy (a child not reaped yet holds the database open): detach it now, freed when the last file closes.
        subprocess.run(["umount", "-l", str(path)], capture_output=True, text=True, timeout=60, check=True)


def fill(path: Path) -> int:
    """Fill the filesystem of ``path`` with a ballast file, to the last block; returns the bytes it took.

    Written in shrinking chunks until ``ENOSPC`` at the smallest, so no block is left free; the
    file is fsynced so the space is really taken (tmpfs takes it at once anyway).
    """
    ballast = path / BALLAST
    written = 0
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in _CHUNKS:
            block = b"\0" * size
            while True:
                try:
                    written += os.write(fd, block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
    return written


def drain(path: Path) -> None:
    """Remove the ballast: the space is free again."""
    (path / BALLAST).unlink(missing_ok=True)
