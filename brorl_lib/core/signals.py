"""Stop signals as an exception: within ``stop_signals_raise``, SIGTERM, SIGINT and SIGHUP (``kill``, ``timeout``,
``scancel``, Ctrl-C, a closed terminal) raise ``Stopped`` in the main thread, so that the clean-up around a long
command (``finally`` blocks, ``except KeyboardInterrupt``) runs as it does for Ctrl-C at a terminal."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """A stop signal arrived; ``status`` is the shell's exit status for it (128 + the signal's number)."""

    def __init__(self, signum: int) -> None:
        self.signum, self.name, self.status = signum, signal.Signals(signum).name, 128 + signum
        super().__init__(self.name)


@contextmanager
def stop_signals_raise(what: str, say: Callable[[str], None]) -> Iterator[list[int]]:
    """Within the block (in the main thread; elsewhere the handlers stay as they are), the first stop signal says
    ``NAME: stopping WHAT`` and raises ``Stopped``; a later one only says so, and the clean-up goes on. Yields the
    signals taken, in order; the handlers before the block are back on the way out."""
    taken: list[int] = []

    def handler(signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        if taken:  # already on the way out: let the clean-up finish
            say(f"{name} again: still stopping {what}")
            return
        taken.append(signum)
        say(f"{name}: stopping {what}")
        raise Stopped(signum)

    main = threading.current_thread() is threading.main_thread()
    before = {s: signal.signal(s, handler) for s in SIGNALS} if main else {}
    try:
        yield taken
    finally:
        for s, old in before.items():
            signal.signal(s, old)
