"""The papermill pipeline on a tiny real notebook: skip, re-run, failure, manifest, status."""

import _thread
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from hang_limits import HANG_S

from brorl_lib.core import locks
from brorl_lib.core.params import NotebookConfig
from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.core.profiles import Plan, load_profile, plan_run, profile_files
from brorl_lib.core.registry import NotebookSpec, get_notebook
from brorl_lib.core.validation import check_int
from brorl_lib.pipeline import cli, execute, hashing, manifest
from brorl_lib.pipeline import runner as pipeline
from brorl_lib.verl_recipe import processes  # finding a run's processes by a mark in their environment

MARK = "BRORL_TEST_PIPELINE_MARK"  # in every process a test's run starts, to find them afterwards


@dataclass(frozen=True)
class TinyConfig(NotebookConfig):
    x: int
    fail: bool

    def validate(self):
        check_int("x", self.x, low=0)


TINY_CELLS = [
    ("x: int = 1  # a number, ≥ 0\nfail: bool = False  # raise after writing the table", ["parameters"]),
    ("import pandas as pd\nfrom brorl_lib.core.table_files import save_table", []),
    ('save_table(pd.DataFrame({"x": [x]}), "tiny", provenance="reproduced", caption="tiny")', []),
    ('if fail:\n    raise RuntimeError("requested failure")', []),
    ("if x == SLOW:\n    import time\n\n    time.sleep(120)", []),
]
SLOW = 99  # x that makes the tiny notebook sleep


def write_tiny(folder, name="tiny"):
    """The tiny notebook as ``folder/name.ipynb``, writing the table ``name``."""
    nb = nbformat.v4.new_notebook()
    for src, tags in TINY_CELLS:
        cell = nbformat.v4.new_code_cell(src.replace('"tiny"', f'"{name}"').replace("SLOW", str(SLOW)))
        cell.metadata["tags"] = tags
        nb.cells.append(cell)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    folder.mkdir(exist_ok=True)
    nbformat.write(nb, folder / f"{name}.ipynb")


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A one-table notebook, its spec, and a build folder of its own."""
    write_tiny(tmp_path / "nb")
    lib = tmp_path / "lib.py"
    lib.write_text("VERSION = 1\n")
    monkeypatch.setattr(pipeline, "BUILD_DIR", tmp_path / "build")
    monkeypatch.setattr(pipeline, "STATE_FILE", tmp_path / "build" / "state.json")
    monkeypatch.setattr(hashing, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(hashing, "library_files", lambda cells: [lib])
    spec = NotebookSpec("tiny", "a tiny notebook", f"{__name__}:TinyConfig", directory=tmp_path / "nb", timeout_s=120)
    return spec, tmp_path / "figures", lib


def plan(spec, **params):
    return Plan(spec, "quick", params, spec.timeout_s)


def test_run_skip_rerun_and_failure(tiny):
    spec, out, lib = tiny
    first = pipeline.run_notebook(plan(spec, x=1), out, log_output=False)
    assert first.status == "ran" and first.files == ("tiny.csv", "tiny.md", "tiny.tex")
    assert pd.read_csv(out / "tiny.csv")["x"].tolist() == [1]
    entry = manifest.load(out)["artifacts"]["tiny.csv"]
    assert entry["notebook"] == "tiny" and entry["provenance"] == "reproduced" and entry["parameters"] == {"x": 1}
    assert (pipeline.BUILD_DIR / "notebooks" / "tiny.ipynb").exists()

    assert pipeline.run_notebook(plan(spec, x=1), out, log_output=False).status == "skipped"

    lib.write_text("VERSION = 2\n")  # a library change re-runs the notebook
    assert pipeline.run_notebook(plan(spec, x=1), out, log_output=False).status == "ran"
    assert pipeline.run_notebook(plan(spec, x=1), out, log_output=False).status == "skipped"

    assert (out / "notebooks" / "tiny.ipynb").is_file()  # a run into its own folder keeps its executed notebook
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    with pytest.raises(pipeline.NotebookFailed) as err:
        pipeline.run_notebook(plan(spec, x=7, fail=True), out, log_output=False)
    message = str(err.value)
    assert "notebook tiny failed in code cell 4" in message and "RuntimeError: requested failure" in message
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before  # artifacts, manifest intact
    assert (pipeline.BUILD_DIR / "notebooks" / "tiny.failed.ipynb").exists()


def test_timeout_kills_the_run(tiny):
    spec, out, _ = tiny
    slow = Plan(spec, "quick", {"x": 1}, timeout_s=1)
    with pytest.raises(pipeline.NotebookFailed, match="ran past its timeout of 1 s"):
        pipeline.run_notebook(slow, out, log_output=False)
    assert not out.exists()


def test_side_by_side_runs_enter_every_file(tiny):
    spec, out, _ = tiny
    write_tiny(spec.directory, "tiny_b")
    other = NotebookSpec("tiny_b", "another", spec.config, directory=spec.directory, timeout_s=120)
    results = cli.run_all([plan(spec, x=1), plan(other, x=2)], out, pipeline.DEFAULT_LOOK, 2, False, False)
    assert [(r.name, r.status) for r in results] == [("tiny", "ran"), ("tiny_b", "ran")]
    recorded = manifest.load(out)["artifacts"]
    assert sorted(recorded) == sorted(f"{n}.{k}" for n in ("tiny", "tiny_b") for k in ("csv", "md", "tex"))
    assert pd.read_csv(out / "tiny_b.csv")["x"].tolist() == [2]
    again = cli.run_all([plan(spec, x=1), plan(other, x=2)], out, pipeline.DEFAULT_LOOK, 2, False, False)
    assert [r.status for r in again] == ["skipped", "skipped"]


def test_a_failure_starts_no_further_notebook_and_keeps_what_finished(tiny):
    spec, out, _ = tiny
    for name in ("tiny_b", "tiny_c"):
        write_tiny(spec.directory, name)
    b, c = (NotebookSpec(n, n, spec.config, directory=spec.directory, timeout_s=120) for n in ("tiny_b", "tiny_c"))
    with pytest.raises(pipeline.NotebookFailed, match="notebook tiny_b failed in code cell 4"):
        plans = [plan(spec, x=1), plan(b, x=1, fail=True), plan(c, x=1)]
        cli.run_all(plans, out, pipeline.DEFAULT_LOOK, 1, False, False)
    assert sorted(manifest.load(out)["artifacts"]) == ["tiny.csv", "tiny.md", "tiny.tex"]


def test_refresh_runs_side_by_side_in_place_each_into_its_own_folder_and_names_a_failure(tiny):
    spec, _, _ = tiny
    write_tiny(spec.directory, "tiny_b")
    a, b = spec.directory / "tiny.ipynb", spec.directory / "tiny_b.ipynb"
    pipeline.refresh_notebooks([(a, {"x": 3}), (b, {})], jobs=2)
    for path, x in ((a, 3), (b, 1)):
        nb = nbformat.read(path, as_version=4)
        assert nb.cells[0].source.startswith("x: int = 1")  # the notebook's own cell stays; its values are injected
        injected = [c.source for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
        assert injected == ([] if x == 1 else [f"# Parameters\nx = {x}\n"])
    assert list((pipeline.BUILD_DIR / "refresh").iterdir()) == []  # each ran in a folder of its own, then removed
    before = b.read_bytes()
    with pytest.raises(pipeline.NotebookFailed, match="(?s)tiny_b failed in code cell 4.*tiny_b.ipynb is left"):
        pipeline.refresh_notebooks([(a, {}), (b, {"fail": True})], jobs=2)
    assert b.read_bytes() == before


def test_refresh_refuses_bad_jobs_and_unknown_notebooks_before_any_work(capsys, monkeypatch):
    monkeypatch.setattr(pipeline, "refresh_notebooks", lambda *a, **k: pytest.fail("ran"))
    assert cli.main(["refresh", "--jobs", "0"]) == 2
    assert "--jobs 0 is not allowed" in capsys.readouterr().err
    assert cli.main(["refresh", "01_theory", "01_thoery"]) == 2
    assert "01_thoery" in capsys.readouterr().err


def test_two_runs_of_one_notebook_at_once_never_mix_their_files(tiny):
    """Two terminals, one notebook, two variants: each output folder holds its own run's files and nothing else."""
    spec, out, _ = tiny
    outs = {1: out.parent / "one", 2: out.parent / "two"}
    with ThreadPoolExecutor(2) as pool:  # both kernels start at once and run side by side
        runs = {
            x: pool.submit(pipeline.run_notebook, plan(spec, x=x), folder, log_output=False)
            for x, folder in outs.items()
        }
        results = {x: run.result() for x, run in runs.items()}
    for x, folder in outs.items():
        assert results[x].status == "ran" and results[x].files == ("tiny.csv", "tiny.md", "tiny.tex")
        assert pd.read_csv(folder / "tiny.csv")["x"].tolist() == [x]
        recorded = manifest.load(folder)["artifacts"]
        assert {e["parameters"]["x"] for e in recorded.values()} == {x}
        assert all(manifest.file_problem(folder, f, e) is None for f, e in recorded.items())
    assert list((pipeline.BUILD_DIR / "staging").iterdir()) == []  # each staged in a folder of its own, then removed


@pytest.fixture
def ctrl_c():
    """Ctrl-C raises KeyboardInterrupt here, as at a terminal, even where this process was started ignoring it (a
    background job of a non-interactive shell, where ``_thread.interrupt_main`` would do nothing)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_an_interrupt_stops_the_running_kernels(tiny, ctrl_c):
    spec, out, _ = tiny
    timer = threading.Timer(8.0, _thread.interrupt_main)  # the kernel has started and sleeps by then
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        cli.run_all([plan(spec, x=SLOW, fail=False)], out, pipeline.DEFAULT_LOOK, 1, False, False)
    assert time.monotonic() - start < HANG_S and not pipeline._RUNNING
    assert not out.exists()  # nothing entered


def test_an_interrupt_while_a_notebook_is_prepared_starts_no_kernel(tiny, monkeypatch, ctrl_c):
    spec, out, _ = tiny
    stopped, stop, execute_ = threading.Event(), pipeline.stop_running, pipeline._execute

    def stop_and_tell(run_stopped):
        stop(run_stopped)
        stopped.set()

    def interrupted_before_its_kernel(*args, **kwargs):
        _thread.interrupt_main()  # Ctrl-C before this notebook's kernel starts
        assert stopped.wait(HANG_S)  # the main thread has taken it and stopped the run
        return execute_(*args, **kwargs)

    monkeypatch.setattr(pipeline, "stop_running", stop_and_tell)
    monkeypatch.setattr(pipeline, "_execute", interrupted_before_its_kernel)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        cli.run_all([plan(spec, x=SLOW, fail=False)], out, pipeline.DEFAULT_LOOK, 1, False, False)
    assert time.monotonic() - start < HANG_S and not pipeline._RUNNING and not out.exists()
    monkeypatch.setattr(pipeline, "_execute", execute_)
    again = cli.run_all([plan(spec, x=1, fail=False)], out, pipeline.DEFAULT_LOOK, 1, False, False)
    assert [r.status for r in again] == ["ran"]  # the next run starts its kernels


def _left(token: str, settle_s: float = HANG_S) -> list[int]:
    """The processes carrying ``token`` in MARK once they have had ``settle_s`` to go (a kernel whose papermill
    was killed ends itself within seconds: ipykernel's parent poller)."""
    deadline = time.monotonic() + settle_s
    while (left := processes.marked(token, MARK)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def test_an_interrupt_stops_a_refresh_and_its_kernels(tiny, ctrl_c, monkeypatch):
    spec, _, _ = tiny
    token = secrets.token_hex(4)
    monkeypatch.setenv(MARK, token)
    path = spec.directory / "tiny.ipynb"
    before = path.read_bytes()
    timer = threading.Timer(8.0, _thread.interrupt_main)  # the kernel has started and sleeps by then
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        pipeline.refresh_notebooks([(path, {"x": SLOW})], jobs=1)
    assert time.monotonic() - start < HANG_S and not pipeline._RUNNING
    assert path.read_bytes() == before and not _left(token)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_stop_the_command_and_its_kernels(signum, tmp_path):
    """``kill`` or a closed terminal stops ``python -m brorl_lib run`` as Ctrl-C does: its exit status is the
    shell's for the signal and no papermill or kernel of it runs on."""
    token = secrets.token_hex(4)
    cmd = [sys.executable, "-m", "brorl_lib", "run", "02_simulator", "--force", "--out", str(tmp_path / "out")]
    env = {**os.environ, MARK: token}
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + HANG_S
        while not any(b"ipykernel" in _cmdline(pid) for pid in processes.marked(token, MARK)):
            assert proc.poll() is None and time.monotonic() < deadline, "no kernel started"
            time.sleep(0.2)
        proc.send_signal(signum)
        assert proc.wait(HANG_S) == 128 + signum
        err = proc.stderr.read()
        assert f"{signal.Signals(signum).name}: stopping python -m brorl_lib run and its kernels" in err, err
        assert not _left(token)
    finally:
        proc.kill()
        for pid in processes.marked(token, MARK):
            os.kill(pid, signal.SIGKILL)


def _cmdline(pid: int) -> bytes:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""


def test_library_files_follow_imports():
    code = "from brorl_lib.theory import report as tr\n%matplotlib inline"
    files = {p.relative_to(REPO_ROOT).as_posix() for p in hashing.library_files([code])}
    expected = {
        "theory/report.py",
        "facts/theorem.py",
        "facts/setup.py",
        "core/params.py",
        "core/validation.py",
        "theory/__init__.py",
        "__init__.py",
    }
    assert {f"brorl_lib/{name}" for name in expected} <= files
    assert "brorl_lib/pipeline/runner.py" not in files and "brorl_lib/figures/plotting.py" not in files


def test_status_reports_each_kind_of_staleness(tmp_path):
    spec = get_notebook("01_theory")
    hashes = hashing.input_hashes(spec, {})
    (tmp_path / "a.csv").write_text("x\n1\n")
    (tmp_path / "b.csv").write_text("x\n2\n")
    entry = {
        "notebook": "01_theory",
        "parameters": {},
        "input_hash": hashes["input"],
        "inputs": {k: v for k, v in hashes.items() if k != "input"},
    }
    man = {
        "schema": 1,
        "artifacts": {
            "a.csv": {**entry, "sha256": hashing.sha256_file(tmp_path / "a.csv")},
            "b.csv": {
                **entry,
                "sha256": hashing.sha256_file(tmp_path / "b.csv"),
                "inputs": {**entry["inputs"], "library": "old"},
            },
            "c.csv": {**entry, "sha256": "0"},
        },
    }
    manifest.save(tmp_path, man)
    assert manifest.stale(tmp_path) == [("b.csv", "inputs changed: library"), ("c.csv", "file is missing")]
    (tmp_path / "a.csv").write_text("x\n3\n")
    assert ("a.csv", "file was changed after it was made") in manifest.stale(tmp_path)


def test_profiles_extend_and_reject_unknown_keys(tmp_path):
    index = "base:\n  timeout_s: {01_theory: 5}\nchild:\n  extends: base\nbad:\n  timeouts: {}\nother:\nlist:\n"
    index += "loop:\n  extends: back\nback:\n  extends: loop\norphan:\n  extends: nope\n"
    (tmp_path / "profiles.yaml").write_text(index)
    for profile, name, text in [
        ("base", "01_theory", "seed: 1\neta: 0.1\n"),
        ("child", "01_theory", "seed: 2\n"),
        ("other", "99_nothing", "seed: 1\n"),
        ("list", "01_theory", "- seed\n"),
    ]:
        (tmp_path / profile).mkdir()
        (tmp_path / profile / f"{name}.yaml").write_text(text)
    assert load_profile("child", tmp_path) == {"01_theory": {"parameters": {"seed": 2, "eta": 0.1}, "timeout_s": 5}}
    assert profile_files("child", tmp_path) == {
        "01_theory": [tmp_path / "base/01_theory.yaml", tmp_path / "child/01_theory.yaml"]
    }
    with pytest.raises(ValueError, match="bad: unknown keys \\['timeouts'\\]"):
        load_profile("bad", tmp_path)
    with pytest.raises(ValueError, match="unknown notebook '99_nothing'"):
        load_profile("other", tmp_path)
    with pytest.raises(ValueError, match="list/01_theory.yaml: expected a mapping of parameter name to value"):
        load_profile("list", tmp_path)
    with pytest.raises(ValueError, match="unknown profile 'nope'"):
        load_profile("nope", tmp_path)
    for profile in ("loop", "orphan"):  # an extends that leads nowhere is named by files and values alike
        for read in (load_profile, profile_files):
            with pytest.raises(ValueError, match=r"extends itself through \['loop', 'back'\]|unknown profile 'nope'"):
                read(profile, tmp_path)


def test_plan_rejects_unknown_and_bad_parameters():
    spec = get_notebook("01_theory")
    with pytest.raises(ValueError, match="has no parameter 'n_rollout'"):
        plan_run(spec, "quick", {"n_rollout": 4})
    with pytest.raises(ValueError, match="n_instances=0 is not allowed: expected"):
        plan_run(spec, "quick", {"n_instances": 0})
    ok = plan_run(spec, "paper", {"seed": 3})
    assert ok.parameters["seed"] == 3 and ok.parameters["n_instances"] == 3000 and ok.timeout_s == 900


def test_state_file_is_json(tiny):
    spec, out, _ = tiny
    pipeline.run_notebook(plan(spec, x=2), out, log_output=False)
    state = json.loads(pipeline.STATE_FILE.read_text())
    assert list(state) == [f"{out.resolve()}::tiny"]


def test_rerun_verifies_bytes_logs_the_run_and_keeps_the_manifest(tiny, capfd):
    spec, out, _ = tiny
    first = pipeline.run_notebook(plan(spec, x=1), out, log_output=True)
    assert first.new == first.files and not first.verified
    committed = (out / manifest.MANIFEST_FILE).read_bytes()
    again = pipeline.run_notebook(plan(spec, x=1), out, force=True, log_output=True)
    assert again.verified and not again.changed  # "verified: same bytes"
    assert (out / manifest.MANIFEST_FILE).read_bytes() == committed  # no wall time, host or commit in it
    changed = pipeline.run_notebook(plan(spec, x=2), out, log_output=False)
    assert set(changed.changed) == {"tiny.csv", "tiny.md", "tiny.tex"}

    lines = [json.loads(x) for x in (pipeline.BUILD_DIR / "run-log.jsonl").read_text().splitlines()]
    assert [x["status"] for x in lines] == ["ran", "ran", "ran"]
    assert {"wall_time_s", "host", "git_commit", "time_utc", "python"} <= set(lines[0])
    assert lines[1]["changed"] == [] and lines[2]["changed"] == ["tiny.csv", "tiny.md", "tiny.tex"]

    logged = capfd.readouterr()
    assert "TCP" not in logged.out + logged.err  # the kernel runs over IPC: no "running over TCP" warning
    executed = (pipeline.BUILD_DIR / "notebooks" / "tiny.ipynb").read_text()
    assert "TCP" not in executed and '"papermill"' not in executed


def test_damaged_manifest_is_refused_then_rebuilt(tiny):
    spec, out, _ = tiny
    pipeline.run_notebook(plan(spec, x=1), out, log_output=False)
    (out / manifest.MANIFEST_FILE).write_text('{"schema": 1, "artifacts": {"tiny.csv": ')
    with pytest.raises(manifest.ManifestError, match=r"MANIFEST.json is unreadable .*git checkout"):
        pipeline.run_notebook(plan(spec, x=1), out, log_output=False)
    kept = pipeline.set_aside_damaged_manifest(out)
    assert kept.parent == pipeline.BUILD_DIR / "damaged" and kept.read_text().startswith('{"schema"')
    assert pipeline.run_notebook(plan(spec, x=1), out, log_output=False).status == "ran"  # not "skipped"
    assert sorted(manifest.load(out)["artifacts"]) == ["tiny.csv", "tiny.md", "tiny.tex"]
    assert pipeline.set_aside_damaged_manifest(out) is None


def test_damaged_state_file_only_costs_a_rerun(tiny):
    spec, out, _ = tiny
    pipeline.run_notebook(plan(spec, x=1), out, log_output=False)
    pipeline.STATE_FILE.write_text("[1, 2")
    assert pipeline.run_notebook(plan(spec, x=1), out, log_output=False).status == "ran"
    assert pipeline.run_notebook(plan(spec, x=1), out, log_output=False).status == "skipped"


def test_kernel_sockets_stay_out_of_the_notebook_folder(tmp_path):
    """Over IPC the kernel's sockets are files: they go to a private temporary folder, not the working folder."""
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("import os\nprint(sorted(os.listdir('.')))"))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "ls.ipynb")
    execute.execute(tmp_path / "ls.ipynb", tmp_path / "out.ipynb", cwd=tmp_path)
    printed = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[0].outputs[0]["text"]
    assert printed.strip() == "['ls.ipynb', 'out.ipynb']"  # no kernel-ipc-<n> socket while the kernel ran
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ls.ipynb", "out.ipynb"]


def test_a_second_holder_of_a_lock_is_refused_with_the_first_ones_process(tmp_path):
    path = tmp_path / "x.lock"
    with locks.held(path, "the thing"):
        with pytest.raises(locks.Busy, match=rf"the thing is in use by process {os.getpid()} \("):
            with locks.held(path, "the thing", wait=False):
                pass
    with locks.held(path, "the thing", wait=False):  # released: taken at once
        pass


def test_a_second_book_build_into_one_folder_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    from brorl_lib.book import build

    monkeypatch.setattr(build, "_build", lambda *a: pytest.fail("built"))
    with locks.held(tmp_path / build.LOCK_FILE, "the first build"):
        assert build.main(["--out", str(tmp_path)]) == 2
    assert f"is in use by process {os.getpid()}" in capsys.readouterr().err
