"""Run notebooks with papermill, skip unchanged ones, and move their artifacts into place.

A run executes in a staging folder of its own (two runs at once, of one notebook too, never share one); only after
the notebook succeeds are its files moved (each by an atomic rename) into the output folder and entered in its
MANIFEST.json. A run in another figure style (``figures.styles``) or with SVG files never writes into figures/; its
entries record the style. A failed or timed-out run leaves the output folder as it was and names the failing notebook
and cell. Each run compares the
bytes it made with those it replaces (``RunResult.changed``) and adds a line to build/run-log.jsonl. Manifests,
build/state.json and the log are read and written under a lock shared by every process of the checkout.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml

from brorl_lib.core import atomic, locks, variants
from brorl_lib.core.artifacts import read_record
from brorl_lib.core.paths import BUILD_DIR, FIGURES_DIR, INTERACTIVE_ENV, OUTPUT_DIR_ENV
from brorl_lib.core.profiles import Plan
from brorl_lib.figures import styles
from brorl_lib.pipeline import manifest, run_log
from brorl_lib.pipeline.hashing import input_hashes, sha256_file
from brorl_lib.pipeline.notebook_noise import strip_noise

STATE_FILE = BUILD_DIR / "state.json"
_SHARED = threading.Lock()  # runs side by side (``pipeline.cli.run_all``) take turns with manifest, state and log
_RUNNING: set[subprocess.Popen] = set()  # the notebooks' processes running now
_STARTING = threading.Lock()  # a kernel is started, or the running ones stopped, one at a time
_RUN = threading.local()  # in a run's worker threads: ``stopped``, that run's Event (set by stop_running)


class NotebookFailed(RuntimeError):
    """A notebook raised, or ran past its timeout."""


@dataclass(frozen=True)
class RunResult:
    name: str
    status: str  # "ran" or "skipped"
    wall_time_s: float
    files: tuple[str, ...]
    changed: tuple[str, ...] = ()  # files whose bytes differ from the ones they replaced
    new: tuple[str, ...] = ()  # files that were not there before
    removed: tuple[str, ...] = ()  # files of this notebook it no longer makes

    @property
    def verified(self) -> bool:
        """Ran, and wrote exactly the bytes that were there: the artifacts are reproduced."""
        return self.status == "ran" and bool(self.files) and not (self.changed or self.new or self.removed)


@contextlib.contextmanager
def _shared() -> Iterator[None]:
    """Manifest, state and log to this run alone: its own threads take turns, then other processes' runs do."""
    with _SHARED, locks.held(BUILD_DIR / "pipeline.lock", "the pipeline's manifests and state"):
        yield


def _own_folder(parent: Path, name: str) -> Path:
    """A new, empty folder under ``parent`` for one run of notebook ``name``."""
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=parent))


def _load_state() -> dict:
    """build/state.json (input hash of each notebook's last success here); a damaged one counts as empty."""
    try:
        state = json.loads(STATE_FILE.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return state if isinstance(state, dict) else {}


@dataclass(frozen=True)
class Look:
    """How a run draws its figures: a style (``figures.styles``) and the formats to write."""

    style: styles.FigureStyle = styles.PAPER
    formats: tuple[str, ...] = styles.FORMATS
    stamp: bool = True  # the provenance stamp in the image (off: in the metadata and caption only)

    @property
    def is_default(self) -> bool:
        return self.style.is_default and self.formats == styles.FORMATS and self.stamp

    @property
    def key(self) -> str:
        """Part of a run's identity: the same inputs in another look are another run."""
        if self.is_default:
            return ""
        return f"::style={self.style.label}::formats={','.join(self.formats)}" + ("" if self.stamp else "::nostamp")


DEFAULT_LOOK = Look()


def check_look(look: Look, out_dir: Path, flag: str = "--style") -> None:
    """A styled run, one with SVG files or one without stamps never writes into figures/ (its committed paper
    style and manifest)."""
    if look.is_default:
        return
    out = Path(out_dir).resolve()
    figures = FIGURES_DIR.resolve()
    if out == figures or out.is_relative_to(figures):
        raise ValueError(
            f"{flag} writes into --out DIR, never figures/ (it keeps the paper style its manifest checks): "
            "add --out DIR, e.g. --out build/styled"
        )


def _state_key(out_dir: Path, name: str, look: Look = DEFAULT_LOOK) -> str:
    return f"{Path(out_dir).resolve()}::{name}{look.key}"


def is_current(plan: Plan, out_dir: Path, hashes: dict[str, str], look: Look = DEFAULT_LOOK) -> bool:
    """The last successful run here had the same inputs and look, and its files are all intact."""
    if _load_state().get(_state_key(out_dir, plan.spec.name, look)) != hashes["input"]:
        return False
    entries = manifest.load(out_dir)["artifacts"]
    mine = {f: e for f, e in entries.items() if e["notebook"] == plan.spec.name}
    style = None if look.style.is_default else look.style.label
    return bool(mine) and all(
        manifest.file_problem(out_dir, f, e) is None
        and e["input_hash"] == hashes["input"]
        and (e.get("style") == style or not f.endswith(("pdf", "png", "svg")))
        for f, e in mine.items()
    )


def _kernel_env() -> dict[str, str]:
    """Environment for papermill's kernel: inline figures (no forced backend), fixed hash seed, explore cells
    static (their committed output is one fixed line)."""
    drop = {OUTPUT_DIR_ENV, "MPLBACKEND", styles.STYLE_ENV, styles.FORMATS_ENV, variants.PROFILE_ENV, styles.STAMP_ENV}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "PYTHONHASHSEED": "0", INTERACTIVE_ENV: "0"}


def _failure_message(name: str, executed: Path) -> str:
    """Name the first cell that raised, from the executed copy papermill wrote."""
    try:
        nb = nbformat.read(executed, as_version=4)
    except Exception:  # noqa: BLE001 - the copy may be absent or half-written after a kill
        return f"notebook {name} failed before any cell ran; see the log above"
    code_index = 0  # numbered as in the source notebook: papermill's injected cell is not counted
    for cell in nb.cells:
        if cell.cell_type != "code" or "injected-parameters" in cell.metadata.get("tags", []):
            continue
        code_index += 1
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                first = next((ln for ln in cell.source.splitlines() if ln.strip()), "")
                return (
                    f"notebook {name} failed in code cell {code_index} ({first.strip()[:80]!r}): "
                    f"{out.get('ename')}: {out.get('evalue')}\n  executed copy: {executed}"
                )
    return f"notebook {name} failed; executed copy: {executed}"


def _execute(plan: Plan, staging: Path, executed: Path, log_output: bool, look: Look = DEFAULT_LOOK) -> int:
    """papermill (``pipeline.execute``) in a child process group, killed whole on timeout; returns its exit code."""
    params_file = staging / "parameters.yaml"
    params_file.write_text(yaml.safe_dump(plan.parameters))
    cmd = [
        sys.executable,
        "-m",
        "brorl_lib.pipeline.execute",
        str(plan.spec.path),
        str(executed),
        "--parameters",
        str(params_file),
        "--cwd",
        str(plan.spec.path.parent),
    ]
    if log_output:
        cmd.append("--log-output")
    env = {**_kernel_env(), OUTPUT_DIR_ENV: str(staging), variants.PROFILE_ENV: plan.profile}
    env[styles.STYLE_ENV] = look.style.path or look.style.name
    env[styles.FORMATS_ENV] = ",".join(look.formats)
    env[styles.STAMP_ENV] = "1" if look.stamp else "0"
    try:
        return _run_child(plan.spec.name, cmd, env, plan.timeout_s)
    except subprocess.TimeoutExpired:
        raise NotebookFailed(
            f"notebook {plan.spec.name} ran past its timeout of {plan.timeout_s} s "
            f"(set its timeout_s under {plan.profile} in params/profiles.yaml)"
        ) from None


def _run_child(name: str, cmd: list[str], env: dict[str, str], timeout_s: float | None = None) -> int:
    """``cmd`` (papermill on notebook ``name``) in a session of its own, listed as running until it ends; killed
    whole on a timeout (TimeoutExpired is raised) or an interrupt. Returns its exit code."""
    with _STARTING:  # an interrupt that came while this notebook was prepared starts no kernel
        stopped = getattr(_RUN, "stopped", None)
        if stopped is not None and stopped.is_set():
            raise NotebookFailed(f"notebook {name} was not started: the run was stopped")
        proc = subprocess.Popen(cmd, env=env, start_new_session=True)
        _RUNNING.add(proc)
    try:
        return proc.wait(timeout=timeout_s)
    except BaseException:  # a timeout or an interrupt: the kernel runs in a session of its own, so it is stopped here
        _kill(proc)
        raise
    finally:
        _RUNNING.discard(proc)


def _kill(proc: subprocess.Popen) -> None:
    """Kill ``proc``'s process group (papermill and its kernel) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def worker_pool(jobs: int) -> tuple[ThreadPoolExecutor, threading.Event]:
    """Threads for one run's notebooks, and the run's stop event: each thread is the run's from its start, so once
    ``stop_running`` has set the event none of them starts a kernel, not even one whose start an interrupt cut
    short (the pool then has no hold on that thread)."""
    stopped = threading.Event()
    return ThreadPoolExecutor(max_workers=jobs, initializer=_join_run, initargs=(stopped,)), stopped


def _join_run(stopped: threading.Event) -> None:
    _RUN.stopped = stopped


def stop_running(stopped: threading.Event) -> None:
    """Kill every notebook process running now; the run whose event ``stopped`` is starts no kernel any more (an
    interrupted or failed run: a notebook still being prepared starts none)."""
    with _STARTING:
        stopped.set()
        running = list(_RUNNING)
    for proc in running:
        _kill(proc)


def set_aside_damaged_manifest(out_dir: Path) -> Path | None:
    """If ``out_dir``'s manifest is unreadable, move it to build/ (kept for a look) and return where it went."""
    try:
        manifest.load(out_dir)
        return None
    except manifest.ManifestError:
        kept = BUILD_DIR / "damaged" / f"{Path(out_dir).resolve().name}-{manifest.MANIFEST_FILE}"
        kept.parent.mkdir(parents=True, exist_ok=True)
        os.replace(manifest.path_of(out_dir), kept)
        return kept


def _log(plan: Plan, out_dir: Path, hashes: dict, result: RunResult | None, error: str | None = None) -> None:
    entry = {"notebook": plan.spec.name, "profile": plan.profile, "out": str(out_dir), "input_hash": hashes["input"]}
    if result is None:
        entry.update(status="failed", error=error)
    else:
        entry.update(
            status=result.status,
            wall_time_s=result.wall_time_s,
            files=len(result.files),
            changed=list(result.changed),
            new=list(result.new),
            removed=list(result.removed),
        )
    run_log.append(entry, BUILD_DIR / run_log.RUN_LOG.name)


def run_notebook(
    plan: Plan, out_dir: Path = FIGURES_DIR, force: bool = False, log_output: bool = True, look: Look = DEFAULT_LOOK
) -> RunResult:
    """Execute one planned notebook unless its inputs (and ``look``) are unchanged since its last success here.

    ``manifest.ManifestError`` (naming the file and the fix) if the output folder's manifest is unreadable:
    ``set_aside_damaged_manifest`` first to rebuild it from the runs that follow. A ``look`` other than the
    paper style's PDF and PNG is refused for figures/ (``check_look``).
    """
    name = plan.spec.name
    out_dir = Path(out_dir)
    check_look(look, out_dir)
    hashes = input_hashes(plan.spec, plan.parameters)
    with _shared():
        man = manifest.load(out_dir)  # an unreadable manifest stops the run here, before any work
        if not force and is_current(plan, out_dir, hashes, look):
            result = RunResult(name, "skipped", 0.0, tuple(manifest.files_of(man, name)))
            _log(plan, out_dir, hashes, result)
            return result

    staging = _own_folder(BUILD_DIR / "staging", name)
    try:
        partial = staging / f"{name}.partial.ipynb"
        failed = BUILD_DIR / "notebooks" / f"{name}.failed.ipynb"  # kept, for a look, when the run fails
        start = time.perf_counter()
        try:
            status = _execute(plan, staging, partial, log_output, look)
        except NotebookFailed as err:  # past its timeout
            _keep(partial, failed)
            raise NotebookFailed(f"{err}; partial copy: {failed}") from None
        if status != 0:
            _keep(partial, failed)
            message = _failure_message(name, failed)
            with _shared():
                _log(plan, out_dir, hashes, None, message)
            raise NotebookFailed(message)
        wall = round(time.perf_counter() - start, 1)
        with _shared():
            return _enter(plan, out_dir, look, hashes, staging, partial, wall)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _keep(partial: Path, failed: Path) -> None:
    """Move a failed run's executed copy out of its staging folder, to ``failed``."""
    if partial.exists():
        failed.parent.mkdir(parents=True, exist_ok=True)
        os.replace(partial, failed)


def _enter(plan: Plan, out_dir: Path, look: Look, hashes: dict, staging: Path, partial: Path, wall: float) -> RunResult:
    """Move a finished run's files from ``staging`` into ``out_dir`` and enter them in its manifest."""
    name = plan.spec.name
    executed_dir = BUILD_DIR / "notebooks"
    executed_dir.mkdir(parents=True, exist_ok=True)
    executed = strip_noise(nbformat.read(partial, as_version=4))
    atomic.write_text(executed_dir / f"{name}.ipynb", nbformat.writes(executed) + "\n")
    if out_dir.resolve() != FIGURES_DIR.resolve():  # a run into its own folder keeps its executed notebook there
        (out_dir / manifest.EXECUTED_DIR).mkdir(parents=True, exist_ok=True)
        atomic.write_text(out_dir / manifest.EXECUTED_DIR / f"{name}.ipynb", nbformat.writes(executed) + "\n")
    partial.unlink()

    entries = {}
    for record in read_record(staging):
        for fname in record["files"]:
            entries[fname] = {
                "notebook": name,
                "artifact": record["name"],
                "provenance": record["provenance"],
                "caption": record["caption"],
                "profile": plan.profile,
                "parameters": plan.parameters,
                "input_hash": hashes["input"],
                "inputs": {k: v for k, v in hashes.items() if k != "input"},
                "sha256": sha256_file(staging / fname),
                **{k: record[k] for k in ("variant", "basis", "style") if k in record},
            }
    new = tuple(sorted(f for f in entries if not (out_dir / f).is_file()))
    changed = tuple(sorted(f for f in entries if f not in new and sha256_file(out_dir / f) != entries[f]["sha256"]))
    out_dir.mkdir(parents=True, exist_ok=True)
    for fname in entries:
        os.replace(staging / fname, out_dir / fname)
    man = manifest.load(out_dir)
    removed = tuple(manifest.replace_notebook(man, name, entries))
    for gone in removed:
        (out_dir / gone).unlink(missing_ok=True)
    manifest.save(out_dir, man)

    state = _load_state()
    state[_state_key(out_dir, name, look)] = hashes["input"]
    atomic.write_text(STATE_FILE, json.dumps(state, indent=2, sort_keys=True))
    result = RunResult(name, "ran", wall, tuple(sorted(entries)), changed, new, removed)
    _log(plan, out_dir, hashes, result)
    return result


def strip_run_metadata(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Remove papermill's timestamps, progress bars and random widget ids (``notebook_noise.strip_noise``), so
    a re-executed notebook diffs only where outputs change."""
    return strip_noise(nb)


def write_parameters_cell(path: Path, source: str) -> bool:
    """Set the source of the notebook's cell tagged ``parameters`` (outputs untouched); True if it changed."""
    nb = nbformat.read(path, as_version=4)
    cell = next((c for c in nb.cells if "parameters" in c.metadata.get("tags", [])), None)
    if cell is None:
        raise ValueError(f"{path.name} has no cell tagged 'parameters'")
    if cell.source == source:
        return False
    cell.source = source
    atomic.write_text(path, nbformat.writes(nb) + "\n")
    return True


def refresh_notebook(path: Path, log_output: bool = False, parameters: dict | None = None) -> None:
    """Re-execute a committed notebook in place (what nbval checks): with its own defaults, or with
    ``parameters`` injected as papermill does (the committed profile's, where it is not the defaults). It runs
    in a new folder under build/refresh/ (its artifacts, its executed copy), removed when it ends; a failed
    run's copy is kept as build/refresh/<notebook>.failed.ipynb."""
    own = _own_folder(BUILD_DIR / "refresh", path.stem)  # two refreshes at once never share a file
    try:
        _refresh_in(path, own, log_output, parameters)
    finally:
        shutil.rmtree(own, ignore_errors=True)


def _refresh_in(path: Path, own: Path, log_output: bool, parameters: dict | None) -> None:
    tmp = own / path.name
    cmd = [sys.executable, "-m", "brorl_lib.pipeline.execute", str(path), str(tmp), "--cwd", str(path.parent)]
    if parameters:
        values = own / "parameters.yaml"
        atomic.write_text(values, yaml.safe_dump(parameters, sort_keys=False))
        cmd += ["--parameters", str(values)]
    if log_output:
        cmd.append("--log-output")
    artifacts = own / "artifacts"
    started = time.monotonic()
    if _run_child(path.stem, cmd, {**_kernel_env(), OUTPUT_DIR_ENV: str(artifacts)}):
        failed = own.parent / f"{path.stem}.failed.ipynb"
        if tmp.exists():
            os.replace(tmp, failed)
        raise NotebookFailed(f"{_failure_message(path.stem, failed)}; {path.name} is left as it was")
    nb = strip_run_metadata(nbformat.read(tmp, as_version=4))
    atomic.write_text(path, nbformat.writes(nb) + "\n")
    print(f"refreshed {path.name} in {time.monotonic() - started:.1f} s", flush=True)


def refresh_notebooks(targets: list[tuple[Path, dict]], jobs: int) -> None:
    """``refresh_notebook`` on each (path, parameters), ``jobs`` side by side, each its own kernel: the same bytes
    as one at a time. A failure starts no further notebook and is raised when those running have ended; an
    interrupt stops those running too."""
    pool, stopped = worker_pool(jobs)
    with pool:
        futures = [pool.submit(refresh_notebook, path, parameters=parameters) for path, parameters in targets]
        try:
            for future in futures:
                while not future.done():
                    wait([future], timeout=0.5)  # woken to take an interrupt
                future.result()
        except (KeyboardInterrupt, SystemExit):
            stop_running(stopped)
            raise
        finally:
            pool.shutdown(cancel_futures=True)
