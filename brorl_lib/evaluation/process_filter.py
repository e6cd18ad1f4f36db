"""A seccomp filter that stops a candidate program from creating processes (threads stay allowed), from
tracing processes and from using the kernel's keyrings.

The field's checkers forbid candidate programs to start processes (human-eval's and LiveCodeBench's
``reliability_guard`` set ``os.fork``, ``subprocess.Popen`` ... to ``None``); that guard is Python-level, so
``ctypes`` gets past it. This filter enforces the same rule in the kernel: ``fork``, ``vfork`` and ``clone``
without ``CLONE_THREAD`` fail with ``EPERM``, ``clone3`` (whose flags a filter cannot read) with ``ENOSYS``
(glibc then falls back to ``clone`` for threads), and a system call of another ABI (i386, x32) kills the
process. So a fork bomb stops at its first fork, on any machine and for any user (RLIMIT_NPROC does not
bind a process whose real user is root). ``ptrace``, ``process_vm_writev`` and the keyring calls (``keyctl``,
``add_key``, ``request_key``: the evaluator's session keyring is inherited) fail with ``EPERM`` too, as in
Docker's default seccomp profile. The sandbox's bootstrap loads the filter with ``prctl`` before the
candidate's code runs; a loaded filter cannot be removed.

``filter_bytes()`` is the classic-BPF program (``struct sock_filter[]``, 8 bytes an instruction) for this
machine, or ``None`` where its system call numbers are not known here (only x86_64 and aarch64 are).
"""

from __future__ import annotations

import errno
import platform
import struct

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ/JGE/JSET|K, BPF_RET|K
_ALLOW, _ERRNO, _KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000  # SECCOMP_RET_*
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (little-endian: low half of args[0])
CLONE_THREAD = 0x00010000
X32_SYSCALL_BIT = 0x40000000

# machine: (AUDIT_ARCH_*, {system call: number}) from the kernel's unistd tables
ARCHES = {
    "x86_64": (
        0xC000003E,
        {
            "clone": 56,
            "fork": 57,
            "vfork": 58,
            "clone3": 435,
            "ptrace": 101,
            "process_vm_writev": 311,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "clone": 220,
            "clone3": 435,
            "ptrace": 117,
            "process_vm_writev": 271,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
        },
    ),
}
DENIED = ("fork", "vfork", "ptrace", "process_vm_writev", "add_key", "request_key", "keyctl")  # EPERM


def _program(arch: int, nr: dict[str, int], x32: bool) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) tuples; jumps are resolved from labels."""
    ops: list[tuple] = [(_LD_W_ABS, 0, 0, _ARCH), (_JEQ, None, "kill", arch), (_LD_W_ABS, 0, 0, _NR)]
    if x32:
        ops.append((_JGE, "kill", None, X32_SYSCALL_BIT))
    ops.append((_JEQ, "enosys", None, nr["clone3"]))
    ops += [(_JEQ, "eperm", None, nr[name]) for name in DENIED if name in nr]
    ops += [(_JEQ, None, "allow", nr["clone"]), (_LD_W_ABS, 0, 0, _ARG0), (_JSET, "allow", "eperm", CLONE_THREAD)]
    labels = {
        "allow": (_RET, 0, 0, _ALLOW),
        "eperm": (_RET, 0, 0, _ERRNO | errno.EPERM),
        "enosys": (_RET, 0, 0, _ERRNO | errno.ENOSYS),
        "kill": (_RET, 0, 0, _KILL_PROCESS),
    }
    where = {name: len(ops) + i for i, name in enumerate(labels)}
    out = []
    for i, (code, jt, jf, k) in enumerate(ops):
        jt = 0 if jt is None else where[jt] - i - 1 if isinstance(jt, str) else jt
        jf = 0 if jf is None else where[jf] - i - 1 if isinstance(jf, str) else jf
        out.append((code, jt, jf, k))
    return out + list(labels.values())


def filter_bytes(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one, ``platform.machine()``), or None if unsupported."""
    machine = platform.machine() if machine is None else machine
    if machine not in ARCHES:
        return None
    arch, nr = ARCHES[machine]
    return b"".join(struct.pack("<HBBI", *op) for op in _program(arch, nr, x32=machine == "x86_64"))


# Loads a filter (hex-encoded argument) into the running process: no_new_privs, then PR_SET_SECCOMP.
# Run by the sandbox's bootstrap before the candidate's code; exits with status 3 if it cannot.
LOADER = r"""
def _load_filter(hex_filter):
    import ctypes, os
    prog = bytes.fromhex(hex_filter)
    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
    libc = ctypes.CDLL(None, use_errno=True)
    fprog = _Fprog(len(prog) // 8, prog)
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:
        os.write(2, b"sandbox: cannot load the process filter\n")
        os._exit(3)
"""
