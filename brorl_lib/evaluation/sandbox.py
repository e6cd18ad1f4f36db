"""A local sandbox for candidate programs: one subprocess per test, with time, memory and output
limits and no network.

Each test runs ``sys.executable -I`` (isolated: no user site, no PYTHON* variables) in a fresh
temporary folder, with an environment holding no proxy settings, in its own session so a timeout
kills everything it started. A bootstrap, run before the candidate's code:

* lowers RLIMIT_AS (memory), RLIMIT_CPU (CPU seconds), RLIMIT_FSIZE (bytes written, so stdout, which
  goes to a file, is capped) and RLIMIT_CORE, soft and hard, so the candidate cannot raise them;
* replaces ``socket.socket`` (and ``_socket.socket``, ``create_connection``, ``socketpair``,
  ``fromfd``) with versions that raise ``PermissionError``.

Where ``unshare`` can create a network namespace (``unshare -rn`` unprivileged, else ``unshare -n``),
the process also runs in an empty one: no interface but a down loopback, so even raw system calls
reach nothing. Not covered: the file system (the candidate can read what the user running the
evaluation can read) and process counts; run evaluations as an unprivileged user.

Scoring follows PRIME/ProRL (paper-notes §7.1): 0 for a compile (syntax) error or a timeout, else the
fraction of tests passed. Outputs are compared token by token after splitting on whitespace, numbers
within 1e-6 (relative or absolute) counting as equal (our choice, as APPS-style checkers do).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from brorl_lib.core.validation import check_int, check_positive

_BOOTSTRAP = r"""
import resource, sys
_mem, _cpu, _fsize = (int(a) for a in sys.argv[1:4])
for _lim, _val in ((resource.RLIMIT_AS, _mem), (resource.RLIMIT_CPU, _cpu), (resource.RLIMIT_FSIZE, _fsize),
                   (resource.RLIMIT_CORE, 0)):
    resource.setrlimit(_lim, (_val, _val))
import socket, _socket
def _no_network(*args, **kwargs):
    raise PermissionError("network access is disabled in this sandbox")
class _NoSocket(socket.socket):
    def __init__(self, *args, **kwargs):
        _no_network()
socket.socket = _socket.socket = _NoSocket
socket.create_connection = socket.socketpair = socket.fromfd = _no_network
import json, runpy
_path, _mode = sys.argv[4], sys.argv[5]
if _mode == "stdio":
    sys.argv = [_path]
    runpy.run_path(_path, run_name="__main__")
else:
    _fn, _result = sys.argv[6], sys.argv[7]
    _args = json.loads(sys.stdin.read())
    _ns = runpy.run_path(_path, run_name="__candidate__")
    _target = getattr(_ns["Solution"](), _fn) if "Solution" in _ns and hasattr(_ns["Solution"], _fn) else _ns[_fn]
    _value = _target(*_args)
    with open(_result, "w") as _fh:
        json.dump(_value, _fh)
"""


@dataclass(frozen=True)
class Limits:
    """Limits for one test run of a candidate program."""

    time_s: float = 5.0  # wall clock per test, seconds; ProRL's code reward used a 5 s timeout (§7.1), per test is our reading
    memory_mb: int = 1024  # address space, MiB; our choice
    output_mb: int = 64  # largest file (hence stdout) the program may write, MiB; our choice
    max_tests: int | None = None  # run at most this many tests (the first ones); None: all (our choice)

    def __post_init__(self) -> None:
        check_positive("time_s", self.time_s)
        check_int("memory_mb", self.memory_mb, low=64)
        check_int("output_mb", self.output_mb, low=1)
        if self.max_tests is not None:
            check_int("max_tests", self.max_tests, low=1)


@dataclass(frozen=True)
class SandboxResult:
    passed: int  # tests whose output matched
    total: int  # tests there were
    status: str  # "ok", "compile_error", "timeout" (a test ran past its limit) or "no_tests"

    @property
    def score(self) -> float:
        """0 on a compile error or timeout, else the fraction of tests passed."""
        if self.status != "ok" or self.total == 0:
            return 0.0
        return self.passed / self.total


@cache
def network_isolation() -> tuple[str, ...]:
    """The ``unshare`` prefix that gives a process an empty network namespace here, or () if none works."""
    exe = shutil.which("unshare")
    if exe is None:
        return ()
    for flags in ("-rn", "-n"):
        try:
            if subprocess.run([exe, flags, "true"], capture_output=True, timeout=10).returncode == 0:
                return (exe, flags, "--")
        except (OSError, subprocess.TimeoutExpired):
            pass
    return ()


def _tokens_match(actual: str, expected: str) -> bool:
    a, e = actual.split(), expected.split()
    if a == e:
        return True
    if len(a) != len(e):
        return False
    for x, y in zip(a, e):
        if x == y:
            continue
        try:
            if not math.isclose(float(x), float(y), rel_tol=1e-6, abs_tol=1e-6):
                return False
        except ValueError:
            return False
    return True


def _as_text(value) -> str:
    return "\n".join(map(str, value)) if isinstance(value, list) else str(value)


def _call_matches(result, expected) -> bool:
    if isinstance(expected, list) and len(expected) == 1 and result != expected:
        expected = expected[0]  # APPS stores a call's return value wrapped in a list
    if isinstance(result, tuple):
        result = list(result)
    return result == expected or (isinstance(result, float) and isinstance(expected, (int, float))
                                  and math.isclose(result, expected, rel_tol=1e-6, abs_tol=1e-6))


def _run_one(workdir: Path, stdin_text: str, mode: list[str], limits: Limits) -> tuple[str, int | None, str]:
    """Run the candidate once; returns (stdout, return code or None on timeout, status)."""
    (workdir / "stdin.txt").write_text(stdin_text)
    cpu = math.ceil(limits.time_s) + 1
    cmd = [*network_isolation(), sys.executable, "-I", "-c", _BOOTSTRAP, str(limits.memory_mb * 2**20), str(cpu),
           str(limits.output_mb * 2**20), str(workdir / "main.py"), *mode]
    env = {"PATH": os.defpath, "LANG": "C.UTF-8", "HOME": str(workdir), "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with open(workdir / "stdin.txt", "rb") as fin, open(workdir / "stdout.txt", "wb") as fout:
        proc = subprocess.Popen(cmd, stdin=fin, stdout=fout, stderr=subprocess.DEVNULL, cwd=workdir, env=env,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=limits.time_s)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the whole session, also after a normal exit
            except ProcessLookupError:
                pass
            proc.wait()
    timed_out = code is None or code in (-signal.SIGXCPU, -signal.SIGKILL)
    out = (workdir / "stdout.txt").read_bytes().decode("utf-8", errors="replace")
    return out, code, "timeout" if timed_out else "ok"


def run_tests(code: str, tests: dict, limits: Limits = Limits()) -> SandboxResult:
    """Run ``code`` on each test of ``tests`` ({"inputs", "outputs"[, "fn_name"]}) in the sandbox.

    Stops at the first timeout (the sample then scores 0, as in PRIME's reward).
    """
    inputs, outputs = list(tests["inputs"]), list(tests["outputs"])
    if limits.max_tests is not None:
        inputs, outputs = inputs[: limits.max_tests], outputs[: limits.max_tests]
    if not inputs:
        return SandboxResult(0, 0, "no_tests")
    try:
        compile(code, "<candidate>", "exec")
    except (SyntaxError, ValueError):
        return SandboxResult(0, len(inputs), "compile_error")
    fn_name = tests.get("fn_name")
    passed = 0
    with tempfile.TemporaryDirectory(prefix="brorl-sandbox-") as tmp:
        workdir = Path(tmp)
        (workdir / "main.py").write_text(code)
        for given, expected in zip(inputs, outputs):
            if fn_name:
                result_file = workdir / "result.json"
                result_file.unlink(missing_ok=True)
                _, rc, status = _run_one(workdir, json.dumps(given), ["call", fn_name, str(result_file)], limits)
                if status == "timeout":
                    return SandboxResult(passed, len(inputs), "timeout")
                if rc == 0 and result_file.exists():
                    try:
                        passed += _call_matches(json.loads(result_file.read_text()), expected)
                    except ValueError:
                        pass
            else:
                out, rc, status = _run_one(workdir, _as_text(given), ["stdio"], limits)
                if status == "timeout":
                    return SandboxResult(passed, len(inputs), "timeout")
                passed += rc == 0 and _tokens_match(out, _as_text(expected))
    return SandboxResult(passed, len(inputs), "ok")
