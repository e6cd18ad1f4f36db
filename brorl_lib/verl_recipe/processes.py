"""Long commands' child processes: started in a session of their own, ended whole on exit and on a signal.

A verl launch is a tree of processes: ``launch.sh``, ``tee``, ``main_ppo`` and a local Ray cluster
(gcs_server, raylet, the dashboard, the TaskRunner, TransferQueue, workers). Ray moves some of them into
process groups of their own (``os.setpgrp``, ``ray/_private/services.py``), so killing the launch's process
group alone leaves them running. ``start`` puts each child in a new session and marks it, and everything it
starts, with this process's token in ``MARKER_ENV``; ``end`` kills the child's process group, then every
process still in its session or carrying the token. ``stop_on_signals`` makes SIGTERM, SIGINT and SIGHUP
(``timeout``, ``scancel``, Ctrl-C, a closed terminal) raise ``Stopped`` in the main thread, so that the
``finally`` blocks around each child run, and ends whatever is still running on the way out.

Processes that clear their environment and leave the session (none of verl's or Ray's do) are out of reach.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from brorl_lib.core.signals import stop_signals_raise

MARKER_ENV = "BRORL_PROCESS_OWNERS"  # ':'-separated tokens of the commands whose child a process is
TOKEN = f"{os.getpid()}-{secrets.token_hex(4)}"  # this process's mark on its children
PREFIX = "[brorl]"
_live: dict[int, subprocess.Popen] = {}


def say(message: str) -> None:
    """One line on the terminal (stderr, so that it shows whatever stdout is piped to)."""
    print(f"{PREFIX} {message}", file=sys.stderr, flush=True)


def marked_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with this process's token added to ``MARKER_ENV``."""
    owners = [t for t in env.get(MARKER_ENV, "").split(":") if t]
    return {**env, MARKER_ENV: ":".join([*owners, TOKEN])}


def start(cmd: Sequence[str], env: Mapping[str, str] | None = None, **popen: object) -> subprocess.Popen:
    """``subprocess.Popen(cmd)`` in a new session, marked with this process's token; ``end`` ends it."""
    proc = subprocess.Popen(
        list(cmd), env=marked_env(os.environ if env is None else env), start_new_session=True, **popen
    )
    _live[proc.pid] = proc
    return proc


def _session(pid: int) -> int | None:
    """The session of ``pid``; None if it is gone or a zombie (dead, waiting to be reaped)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else int(fields[3])


def _values(pid: int, env_var: str) -> list[str]:
    """The ':'-separated values of ``env_var`` in ``pid``'s environment (empty: not set, gone or not ours)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return []
    key = env_var.encode() + b"="
    for item in environ.split(b"\0"):
        if item.startswith(key):
            return item[len(key) :].decode(errors="replace").split(":")
    return []


def _pids() -> list[int]:
    return [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit() and int(e.name) != os.getpid()]


def marked(token: str, env_var: str = MARKER_ENV) -> list[int]:
    """Live processes other than this one whose ``env_var`` holds ``token`` (tests use it with a marker of
    their own)."""
    return [pid for pid in _pids() if token in _values(pid, env_var)]


def in_session(session: int) -> list[int]:
    """Live processes of session ``session``."""
    return [pid for pid in _pids() if _session(pid) == session]


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def end(proc: subprocess.Popen, settle_s: float = 5.0) -> None:
    """Kill ``proc``'s process group, reap ``proc``, then kill every process left in its session (those that
    moved to a group of their own). Safe to call twice, and after ``proc`` has exited."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
    deadline = time.monotonic() + settle_s
    while True:  # processes that left the group (Ray's setpgrp) but not the session
        left = in_session(proc.pid)
        if not left or time.monotonic() > deadline:
            break
        _kill(left)
        time.sleep(0.1)
    _live.pop(proc.pid, None)


def end_all(settle_s: float = 5.0) -> None:
    """``end`` every child ``start`` started, then kill any process still carrying this process's token."""
    for proc in list(_live.values()):
        end(proc, settle_s)
    deadline = time.monotonic() + settle_s
    while (left := marked(TOKEN)) and time.monotonic() < deadline:
        _kill(left)
        time.sleep(0.1)


@contextmanager
def stop_on_signals(what: str) -> Iterator[None]:
    """Within the block, SIGTERM, SIGINT and SIGHUP raise ``Stopped`` (in the main thread: ``core.signals``); on the
    way out, by any route, every child of ``start`` is ended."""
    taken: list[int] = []
    try:
        with stop_signals_raise(f"{what} and every process it started", say) as taken:
            try:
                yield
            finally:
                end_all()
    finally:
        if taken:
            say(f"stopped {what}; no process of it is left")


def run(
    cmd: Sequence[str], env: Mapping[str, str] | None = None, timeout_s: float | None = None, **popen: object
) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, check=True, **popen)`` through ``start``: the child's session is ended whole when it
    returns or fails (CalledProcessError, TimeoutExpired) or a signal stops this process."""
    proc = start(cmd, env, **popen)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    finally:
        end(proc)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, list(cmd), out, err)
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)
