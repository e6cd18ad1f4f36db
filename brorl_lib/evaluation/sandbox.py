"""Running a candidate program on its tests: one sandboxed process per test, scored as PRIME/ProRL do.

Each test runs ``sys.executable -I`` (isolated: no user site, no PYTHON* variables) inside the OS
sandbox of ``isolation.py`` (bubblewrap: own user, mount, pid and network namespaces, read-only view
of Python, a private tmpfs as its working folder, nothing else), with an environment holding only
PATH, LANG, HOME and single-thread BLAS settings. A bootstrap, run before the candidate's code:

* lowers RLIMIT_AS (memory), RLIMIT_CPU (CPU seconds), RLIMIT_FSIZE (bytes a file may hold, so stdout
  is capped) and RLIMIT_CORE, soft and hard, so the candidate cannot raise them;
* loads ``process_filter``'s seccomp filter: no new processes (threads are fine), as the field's
  checkers forbid, here enforced by the kernel; no ptrace, no keyrings;
* compiles the program (a syntax error, or a source that exhausts the compiler, is a compile error:
  score 0); replaces ``socket.socket`` and friends by versions raising ``PermissionError``; then runs it.

The evaluator trusts nothing the candidate leaves: stdin, stdout, the program text and the control
channel (compile errors, a called function's JSON result) are anonymous files it opened itself and hands
over as file descriptors (no path a candidate could replace), read back at most ``output_mb``; a test
is killed at ``time_s`` of wall clock; the result is parsed under a guard, so any failure scores 0 for
that test and never stops or hangs the evaluation.

Without isolation on the machine, ``run_tests`` raises ``isolation.IsolationUnavailable`` saying what to
install, unless ``Limits(unsafe_no_sandbox=True)`` (CLI: ``--unsafe-no-sandbox``): then each test is a
bare subprocess in a fresh temporary folder with the same bootstrap (same limits, same filter, so the
same scores) but the candidate can read and write what the evaluating user can. Never use it on
programs written by a model trained against this checker.

Scoring follows PRIME and ProRL (arXiv 2505.24864, its code reward): 0 for a compile (syntax) error
or a timeout, else the fraction of tests passed. Outputs are compared token by token after splitting
on whitespace, numbers within 1e-6 (relative or absolute) counting as equal (our choice, as APPS-style
checkers do).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from typing import IO

from brorl_lib.core.validation import check_int, check_positive, check_range, check_type
from brorl_lib.evaluation import isolation, process_filter

COMPILE_ERROR = b"compile_error"  # control channel: the program does not compile
RESULT = b"result:"  # control channel: a called function's return value (JSON) follows

_BOOTSTRAP = (
    process_filter.LOADER
    + r"""
import os, resource, sys
_code_fd, _ctl_fd = int(sys.argv[1]), int(sys.argv[2])
_mem, _cpu, _fsize = (int(a) for a in sys.argv[3:6])
_filter, _mode = sys.argv[6], sys.argv[7]
for _lim, _val in ((resource.RLIMIT_AS, _mem), (resource.RLIMIT_CPU, _cpu), (resource.RLIMIT_FSIZE, _fsize),
                   (resource.RLIMIT_CORE, 0)):
    resource.setrlimit(_lim, (_val, _val))
if _filter:
    _load_filter(_filter)
_src = os.pread(_code_fd, os.fstat(_code_fd).st_size, 0)
os.close(_code_fd)
try:
    compile(_src, "main.py", "exec")
except Exception:
    os.write(_ctl_fd, b"compile_error")
    os._exit(0)
with open("main.py", "wb") as _fh:
    _fh.write(_src)
del _src
import socket, _socket
def _no_network(*args, **kwargs):
    raise PermissionError("network access is disabled in this sandbox")
class _NoSocket(socket.socket):
    def __init__(self, *args, **kwargs):
        _no_network()
socket.socket = _socket.socket = _NoSocket
socket.create_connection = socket.socketpair = socket.fromfd = _no_network
import json, runpy
_path = os.path.abspath("main.py")
if _mode == "stdio":
    sys.argv = [_path]
    runpy.run_path(_path, run_name="__main__")
else:
    _fn = sys.argv[8]
    _args = json.loads(sys.stdin.read())
    _ns = runpy.run_path(_path, run_name="__candidate__")
    _target = getattr(_ns["Solution"](), _fn) if "Solution" in _ns and hasattr(_ns["Solution"], _fn) else _ns[_fn]
    _value = json.dumps(_target(*_args)).encode()
    with os.fdopen(_ctl_fd, "wb", closefd=False) as _fh:
        _fh.write(b"result:" + _value)
"""
)


# Upper bounds of the limits, our choice: beyond them the kernel's limits overflow and every test would fail silently.
MAX_TIME_S = 86_400.0  # a day per test
MAX_MB = 2**20  # 1 TiB


@dataclass(frozen=True)
class Limits:
    """Limits for one test run of a candidate program."""

    time_s: float = 5.0  # wall clock per test, seconds; ProRL's code reward used a 5 s timeout, per test is our reading
    memory_mb: int = 1024  # address space, MiB; our choice
    output_mb: int = 64  # largest file (hence stdout) it may write, and the most its /tmp holds, MiB; our choice
    max_tests: int | None = None  # run at most this many tests (the first ones); None: all (our choice)
    unsafe_no_sandbox: bool = False  # True: no OS isolation (only for trusted programs where bwrap cannot be had)

    def __post_init__(self) -> None:
        check_positive("time_s", self.time_s)
        check_range("time_s", self.time_s, low=0, high=MAX_TIME_S)
        check_int("memory_mb", self.memory_mb, low=64, high=MAX_MB)
        check_int("output_mb", self.output_mb, low=1, high=MAX_MB)
        if self.max_tests is not None:
            check_int("max_tests", self.max_tests, low=1)
        check_type("unsafe_no_sandbox", self.unsafe_no_sandbox, bool, "True or False")

    def scoring_settings(self) -> dict:
        """The limits a score depends on (not whether the OS sandbox was on: the scores are the same)."""
        return {k: v for k, v in asdict(self).items() if k != "unsafe_no_sandbox"}


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


@dataclass(frozen=True)
class _Run:
    stdout: bytes  # what the program wrote to stdout (at most output_mb)
    control: bytes  # what the bootstrap wrote to the control channel (at most output_mb)
    exit_code: int | None  # 0 for success; None when it was killed at the wall-clock limit
    timed_out: bool  # past the wall-clock limit, or killed by SIGXCPU (CPU limit) or SIGKILL


def require_isolation(limits: Limits = Limits()) -> None:
    """Raise ``isolation.IsolationUnavailable`` (saying what to install) unless candidate programs can run
    isolated here or ``limits.unsafe_no_sandbox`` is set."""
    if not limits.unsafe_no_sandbox:
        isolation.require()


def _tokens_match(actual: str, expected: str) -> bool:
    a, e = actual.split(), expected.split()
    if a == e:
        return True
    if len(a) != len(e):
        return False
    for x, y in zip(a, e, strict=True):
        if x == y:
            continue
        try:
            if not math.isclose(float(x), float(y), rel_tol=1e-6, abs_tol=1e-6):
                return False
        except ValueError:
            return False
    return True


def _as_text(value) -> str:
    """A test's stdin or expected stdout as text: a list is its lines; None (missing) is empty, as verl's
    checkers and the public code data sets read it."""
    if value is None:
        return ""
    return "\n".join(map(str, value)) if isinstance(value, list) else str(value)


def _call_matches(result, expected) -> bool:
    if isinstance(expected, list) and len(expected) == 1 and result != expected:
        expected = expected[0]  # APPS stores a call's return value wrapped in a list
    if isinstance(result, tuple):
        result = list(result)
    return result == expected or (
        isinstance(result, float)
        and isinstance(expected, (int, float))
        and math.isclose(result, expected, rel_tol=1e-6, abs_tol=1e-6)
    )


def _call_passes(run: _Run, expected) -> bool:
    """The called function's JSON result (from the control channel) equals ``expected``; any malformed,
    oversized or too deeply nested result is a failed test."""
    if run.exit_code != 0 or not run.control.startswith(RESULT):
        return False
    try:
        return bool(_call_matches(json.loads(run.control[len(RESULT) :]), expected))
    except (ValueError, RecursionError, MemoryError):
        return False


def _read(fh: IO[bytes], limit: int) -> bytes:
    fh.seek(0)
    return fh.read(limit)


def _spawn(
    cmd: list[str], stdin: IO[bytes], stdout: IO[bytes], fds: tuple[int, ...], cwd: str, home: str, time_s: float
) -> int | None:
    """Run ``cmd`` in its own session; its exit code, or None when it was killed at ``time_s`` seconds."""
    env = {
        "PATH": os.defpath,
        "LANG": "C.UTF-8",
        "HOME": home,
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    proc = subprocess.Popen(
        cmd,
        stdin=stdin,
        stdout=stdout,
        stderr=subprocess.DEVNULL,
        pass_fds=fds,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    try:
        code = proc.wait(timeout=time_s)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the whole session, also after a normal exit
        except ProcessLookupError:
            pass
        proc.wait()
    return code


def _readonly_file(data: bytes) -> int:
    """A read-only descriptor of a file that holds ``data`` and has no name (the candidate cannot change it)."""
    fd, path = tempfile.mkstemp(prefix="brorl-code-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return os.open(path, os.O_RDONLY)
    finally:
        os.unlink(path)


def _run_one(code_fd: int, stdin: bytes, mode: list[str], limits: Limits) -> _Run:
    """Run the candidate (program text in ``code_fd``) once on ``stdin``."""
    cap = limits.output_mb * 2**20
    flt = process_filter.filter_bytes()
    with tempfile.TemporaryFile() as fin, tempfile.TemporaryFile() as fout, tempfile.TemporaryFile() as fctl:
        fin.write(stdin)
        fin.seek(0)
        argv = [
            sys.executable,
            "-I",
            "-c",
            _BOOTSTRAP,
            str(code_fd),
            str(fctl.fileno()),
            str(limits.memory_mb * 2**20),
            str(math.ceil(limits.time_s) + 1),
            str(cap),
            flt.hex() if flt else "",
            *mode,
        ]
        fds = (code_fd, fctl.fileno())
        if limits.unsafe_no_sandbox:
            with tempfile.TemporaryDirectory(prefix="brorl-sandbox-") as tmp:
                code = _spawn(argv, fin, fout, fds, tmp, tmp, limits.time_s)
            sig = -code if code is not None and code < 0 else None
        else:
            code = _spawn(isolation.wrap(argv, cap), fin, fout, fds, "/", "/tmp", limits.time_s)
            sig = code - 128 if code is not None and code > 128 else None  # bwrap: 128 + signal
        timed_out = code is None or sig in (signal.SIGXCPU, signal.SIGKILL)
        return _Run(_read(fout, cap), _read(fctl, cap), code, timed_out)


def run_tests(code: str, tests: dict, limits: Limits = Limits()) -> SandboxResult:
    """Run ``code`` on each test of ``tests`` ({"inputs", "outputs"[, "fn_name"]}) in the sandbox.

    A test whose input is None (or all inputs, when "inputs" is None or absent) gets empty stdin, or no
    arguments when a function is called. Stops at the first timeout (the sample then scores 0, as in PRIME's
    reward).
    """
    outputs = list(tests["outputs"])
    inputs = list(tests["inputs"]) if tests.get("inputs") is not None else [None] * len(outputs)
    if limits.max_tests is not None:
        inputs, outputs = inputs[: limits.max_tests], outputs[: limits.max_tests]
    if not inputs:
        return SandboxResult(0, 0, "no_tests")
    require_isolation(limits)
    fn_name = tests.get("fn_name")
    mode = ["call", str(fn_name)] if fn_name else ["stdio"]
    passed = 0
    code_fd = _readonly_file(code.encode("utf-8", errors="surrogatepass"))
    try:
        for given, expected in zip(inputs, outputs, strict=False):
            stdin = json.dumps([] if given is None else given) if fn_name else _as_text(given)
            run = _run_one(code_fd, stdin.encode("utf-8", errors="surrogatepass"), mode, limits)
            if run.control == COMPILE_ERROR:
                return SandboxResult(0, len(inputs), "compile_error")
            if run.timed_out:
                return SandboxResult(passed, len(inputs), "timeout")
            if fn_name:
                passed += _call_passes(run, expected)
            else:
                out = run.stdout.decode("utf-8", errors="replace")
                passed += run.exit_code == 0 and _tokens_match(out, _as_text(expected))
    finally:
        os.close(code_fd)
    return SandboxResult(passed, len(inputs), "ok")
