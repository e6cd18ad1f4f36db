"""OS isolation for candidate programs with bubblewrap (``bwrap``, Flatpak's unprivileged sandbox).

``wrap(argv, tmp_bytes)`` is the command line that runs ``argv``:

* in new user, mount, pid, network, IPC, UTS and cgroup namespaces, as uid/gid 65534 with no
  capabilities, unable to create more user namespaces: no network (not even loopback to the host), no
  abstract Unix sockets, no view of or signal to any process outside;
* as the only process of its pid namespace (pid 1: no bubblewrap init beside it that it could trace and
  make fork), in a new session (no terminal), killed when the caller dies; anything it started ends with it;
* on a file system that holds only read-only views of what Python needs (``/usr`` and the ``/lib*``, ``/bin``
  links or folders, the interpreter's installation ``sys.base_prefix`` and its environment ``sys.prefix``),
  a ``/proc`` of its own processes, a read-only minimal ``/dev``, and a private, empty tmpfs of ``tmp_bytes``
  at ``/tmp``, its working folder; everything else (``/etc``, home, the project, other temp files, sockets
  on disk) does not exist there.

``problem()`` runs a probe once and says why isolation cannot be had here (None when it can);
``require()`` raises ``IsolationUnavailable`` with what to install. Debian/Ubuntu: ``apt-get install
bubblewrap`` (0.8 or later: ``--size``, ``--disable-userns``); the kernel must allow unprivileged user
namespaces (Debian's default; Ubuntu 24.04 needs AppArmor's ``bwrap-userns-restrict`` profile).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Sequence
from functools import cache

from brorl_lib.evaluation import process_filter

SANDBOX_UID = 65534  # "nobody" inside the sandbox
INSTALL_HINT = (
    "install bubblewrap 0.8 or later (Debian/Ubuntu: `sudo apt-get install bubblewrap`, Fedora: "
    "`sudo dnf install bubblewrap`), or, only for programs you trust, pass --unsafe-no-sandbox "
    "(Python: Limits(unsafe_no_sandbox=True))"
)


class IsolationUnavailable(RuntimeError):
    """No OS isolation for candidate programs on this machine."""


def python_paths() -> tuple[str, ...]:
    """Folders the sandboxed interpreter needs besides ``/usr``: its installation and environment."""
    paths = []
    for p in (sys.base_prefix, sys.prefix):
        for q in (os.path.abspath(p), os.path.realpath(p)):
            if q not in paths and q not in ("/", "/usr") and not q.startswith("/usr/"):
                paths.append(q)
    return tuple(paths)


def _system_binds() -> list[str]:
    """``/usr`` read-only, and ``/lib``, ``/lib64``, ``/bin``, ``/sbin`` as the links or folders they are here."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin"):
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    if os.path.isfile("/etc/ld.so.cache"):  # the dynamic linker's index of /usr's libraries; names no user
        args += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    return args


def bwrap() -> str | None:
    """Path of the ``bwrap`` executable, or None."""
    return shutil.which("bwrap") or next((p for p in ("/usr/bin/bwrap", "/bin/bwrap") if os.path.exists(p)), None)


def wrap(argv: Sequence[str], tmp_bytes: int) -> list[str]:
    """``argv`` run inside the sandbox described above, with ``tmp_bytes`` of writable space at ``/tmp``."""
    exe = bwrap()
    if exe is None:
        raise IsolationUnavailable(f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
    args = [
        exe,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--cap-drop",
        "ALL",
        "--as-pid-1",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--remount-ro",
        "/dev",
        "--size",
        str(int(tmp_bytes)),
        "--perms",
        "0700",
        "--tmpfs",
        "/tmp",
        *_system_binds(),
    ]
    for p in python_paths():  # after the tmpfs, so that a Python installed under /tmp stays visible
        args += ["--ro-bind", p, p]
    return [*args, "--chdir", "/tmp", "--remount-ro", "/", "--", *argv]


@cache
def problem() -> str | None:
    """Why candidate programs cannot be isolated here (probed once per process), or None when they can."""
    if bwrap() is None:
        return f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}"
    flt = process_filter.filter_bytes()
    if flt is None:
        return (
            f"the sandbox's process filter knows the system calls of {', '.join(process_filter.ARCHES)} only, "
            f"not {platform.machine()}"
        )
    probe = process_filter.LOADER + f"_load_filter({flt.hex()!r})\nopen('probe', 'w').write('ok')\n"
    cmd = wrap([sys.executable, "-I", "-c", probe], 1 << 20)
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=30, cwd="/", stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap could not run ({e}): {INSTALL_HINT}"
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        return (
            f"bubblewrap cannot create the sandbox here ({why[0]}); it needs version 0.8 or later and "
            f"unprivileged user namespaces (user.max_user_namespaces > 0; on Ubuntu 24.04 AppArmor's "
            f"bwrap-userns-restrict profile from apparmor-profiles; in Docker a seccomp profile allowing "
            f"unshare): {INSTALL_HINT}"
        )
    return None


def require() -> None:
    """Raise ``IsolationUnavailable`` (saying what to install) unless candidate programs can be isolated here."""
    why = problem()
    if why is not None:
        raise IsolationUnavailable(f"code evaluation refused: {why}")
