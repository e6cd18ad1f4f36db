"""Atomic writes: a file (or a folder) is written beside its target under a temporary name, then renamed."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success rename it over ``target``.

    On an exception the temporary file is removed and ``target`` is left untouched.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_bytes(target: str | os.PathLike, data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def write_text(target: str | os.PathLike, text: str) -> None:
    write_bytes(target, text.encode("utf-8"))


def write_with(target: str | os.PathLike, writer: Callable[[Path], None]) -> None:
    """Call ``writer(tmp_path)`` and move its file into place atomically."""
    with atomic_path(target) as tmp:
        writer(tmp)


TMP_SUFFIX, OLD_SUFFIX = (
    ".tmp",
    ".old",
)  # the new copy of a folder while it is written; the previous one during the swap


def write_folder(target: str | os.PathLike, fill: Callable[[Path], None]) -> None:
    """Call ``fill(tmp_folder)``, then swap the folder in for ``target``: an interruption leaves either the
    previous copy or a complete new one, under ``target`` or its TMP_SUFFIX / OLD_SUFFIX twin."""
    target = Path(target)
    tmp, old = target.with_name(target.name + TMP_SUFFIX), target.with_name(target.name + OLD_SUFFIX)
    shutil.rmtree(tmp, ignore_errors=True)
    fill(tmp)
    if target.exists():
        os.replace(target, old)
    os.replace(tmp, target)
    shutil.rmtree(old, ignore_errors=True)
