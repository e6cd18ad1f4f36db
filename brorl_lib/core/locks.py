"""Locks between processes of one checkout: a lock file held with ``flock``, which the kernel releases when its
holder ends (a killed run leaves no stale lock). The holder writes its process id and command line into the file,
so a refused second process can name the first."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Iterator
from pathlib import Path


class Busy(RuntimeError):
    """Another process holds the lock."""


def _holder(path: Path) -> str:
    try:
        return path.read_text().strip() or "a process that has not written its id yet"
    except OSError:
        return "another process"


@contextlib.contextmanager
def held(path: Path, what: str, wait: bool = True) -> Iterator[None]:
    """Hold the lock file ``path`` for the block; ``what`` names what it guards, for the refusal. ``wait``: block
    until it is free; otherwise raise ``Busy`` at once, naming the holder's process id and command."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise Busy(f"{what} is in use by {_holder(path)}; wait for it to end, or stop it") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"process {os.getpid()} ({' '.join(sys.orig_argv)[:300]})\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
