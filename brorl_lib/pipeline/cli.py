"""Command line: ``python -m brorl_lib list | params | run | reproduce | status | refresh``.

``run NAME --style STYLE --out DIR [--svg] [--no-stamp]`` re-draws a notebook's figures in another style
(``figures.styles``). The layout check of every figure in every preset style (tests/layout_check.py) runs in
``make nbval``, not in ``reproduce``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from brorl_lib.core.paths import FIGURES_DIR, REPO_ROOT
from brorl_lib.core.profiles import available_profiles, load_profile, parse_override, plan_run, profile_files
from brorl_lib.core.registry import NOTEBOOKS, get_notebook
from brorl_lib.core.signals import Stopped, stop_signals_raise
from brorl_lib.pipeline import destination

if TYPE_CHECKING:
    from brorl_lib.pipeline.runner import RunResult

# matplotlib, nbformat and the notebooks' own modules load only where a command needs them (inside the
# functions below), so that a command's argument errors print at once.


def _style_presets(with_help: bool) -> str:
    """The preset styles and what each is for, for --style's help (only when help is asked for: reading them
    loads matplotlib)."""
    if not with_help:
        return "see --help"
    from brorl_lib.figures import styles

    # argparse %-formats help strings: a description's "%" is written "%%"
    return "; ".join(f"{k}: {v.description}" for k, v in styles.PRESETS.items()).replace("%", "%%")


def _parser(with_help: bool = True) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m brorl_lib", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the notebooks, in run order")
    params = sub.add_parser("params", help="each notebook's parameters: type, default, meaning and what is allowed")
    params.add_argument("names", nargs="*", help="notebook names (default: all)")
    params.add_argument(
        "--write",
        action="store_true",
        help="rewrite each notebook's parameters cell from its declaration (outputs untouched)",
    )

    def add_run_args(p: argparse.ArgumentParser, default_profile: str) -> None:
        p.add_argument(
            "--profile", default=default_profile, help=f"a profile of params/profiles.yaml (default {default_profile})"
        )
        p.add_argument(
            "--out",
            type=Path,
            help=f"artifact folder; default: figures/ for the {destination.FIGURES_PROFILE} profile's exact "
            f"parameters (the committed files), else a folder of its own under build/{destination.RUNS_DIR}/ "
            "(named in the output); --out figures replaces the committed files with another run's",
        )
        p.add_argument("--force", action="store_true", help="run even if inputs are unchanged")
        p.add_argument("--quiet", action="store_true", help="do not stream cell output")
        p.add_argument(
            "--jobs",
            type=int,
            help="notebooks run side by side (default: one per CPU, at most the number run); each is its own "
            "kernel, so the files are the same bytes; cell output is streamed only when one runs at a time",
        )
        p.add_argument(
            "--style",
            help="re-draw the figures in another style: a preset ("
            + _style_presets(with_help)
            + ") or the path of your own .mplstyle file; needs --out DIR (never figures/); see docs/figures.md",
        )
        p.add_argument("--svg", action="store_true", help="also write each figure as SVG (needs --out DIR)")
        p.add_argument(
            "--no-stamp",
            action="store_true",
            help="leave the provenance stamp out of the images, for a paper (the class stays in each file's "
            "metadata, the caption and the manifest; needs --out DIR)",
        )

    run = sub.add_parser("run", help="run some notebooks")
    run.add_argument("names", nargs="+", help="notebook names, e.g. 01_theory")
    run.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="override one parameter (value read as YAML; numbers in any spelling, e.g. 1e-3); "
        "only with one notebook; `params NAME` lists what each parameter allows",
    )
    add_run_args(run, "quick")
    reproduce = sub.add_parser(
        "reproduce",
        help="run every notebook, started in order, one per CPU at a time (skipping those verified here with "
        "unchanged inputs); each run says "
        "whether it wrote the same bytes as the files it replaced; rebuilds a damaged manifest",
    )
    add_run_args(reproduce, destination.FIGURES_PROFILE)

    status = sub.add_parser(
        "status",
        help="check every artifact's bytes against the SHA-256 its manifest records, list artifacts whose inputs "
        "changed since they were made and files no notebook made (exit 1 if a file is missing or its bytes differ, "
        f"if figures/ holds files made with other parameters than the {destination.FIGURES_PROFILE} profile's, or "
        "if the manifest is missing beside artifacts; 2 if it is unreadable)",
    )
    status.add_argument("--out", type=Path, default=FIGURES_DIR)
    status.add_argument("--check", action="store_true", help="exit 1 if any artifact is stale or not recorded")

    refresh = sub.add_parser(
        "refresh", help="re-execute notebooks/ in place with the profile they are committed with (paper)"
    )
    refresh.add_argument("names", nargs="*", help="notebook names (default: all)")
    refresh.add_argument(
        "--jobs", type=int, help="notebooks run side by side (default: one per CPU); each is its own kernel"
    )
    return ap


def _cmd_list() -> int:
    print(f"profiles: {', '.join(available_profiles())}")
    for i, nb in enumerate(NOTEBOOKS, 1):
        print(f"{i}. {nb.name:<20} {nb.title}")
    return 0


def _cmd_params(names: list[str], write: bool) -> int:
    from brorl_lib.pipeline.runner import write_parameters_cell

    files = {profile: profile_files(profile) for profile in available_profiles()}  # what papermill's -f takes
    for spec in [get_notebook(n) for n in names or [nb.name for nb in NOTEBOOKS]]:
        cell = spec.config_class().parameters_cell()
        if write:
            changed = write_parameters_cell(spec.path, cell)
            print(f"{spec.path.name}: parameters cell {'rewritten' if changed else 'already matches'}")
            continue
        print(f"{spec.name}: {spec.title}")
        for line in cell.splitlines():
            print(f"  {line}")
        for profile, by_notebook in files.items():
            paths = by_notebook.get(spec.name, [])
            flags = " ".join(f"-f {path.relative_to(REPO_ROOT)}" for path in paths) or "(the defaults above)"
            print(f"  profile {profile}: {flags}")
    return 0


def _verdict(result: RunResult) -> str:
    """What a run did to the artifact files, in one line."""
    if result.verified:
        return f"verified: same bytes ({len(result.files)} files)"
    parts = [f"{len(result.files)} files"]
    if result.changed:
        parts.append(f"{len(result.changed)} changed: {', '.join(result.changed)}")
    if result.new:
        parts.append(f"{len(result.new)} new")
    if result.removed:
        parts.append(f"{len(result.removed)} no longer made, deleted: {', '.join(result.removed)}")
    return "; ".join(parts)


def _out_folder(args, plans: list, overrides: dict[str, object]) -> Path:
    """Where this run writes (``destination.choose`` unless ``--out`` names a folder), said on the terminal."""
    if args.out is not None:
        if destination.is_figures(args.out) and not all(destination.is_committed_run(p) for p in plans):
            print(
                f"warning: --out figures: replacing committed files with a run of other parameters than the "
                f"{destination.FIGURES_PROFILE} profile's; `python -m brorl_lib status` will list them until they "
                "are restored (git checkout -- figures/) or re-made (python -m brorl_lib reproduce)",
                file=sys.stderr,
                flush=True,
            )
        return args.out
    out = destination.choose(plans, args.profile, overrides)
    if not destination.is_figures(out):
        print(
            f"artifacts go to {destination.shown(out)}/: not the {destination.FIGURES_PROFILE} profile's parameters, "
            "so the committed figures/ stays as it is (--out DIR to choose the folder)",
            flush=True,
        )
    return out


def _run(names: list[str], args, pairs: list[tuple[str, str]], rebuild_manifest: bool = False) -> int:
    """Run the named notebooks; ``rebuild_manifest`` (reproduce: every notebook) sets a damaged manifest aside.
    Every name, value and option is checked before the figure and notebook machinery loads."""
    if pairs and len(names) != 1:
        raise ValueError("-p/--parameter applies to one notebook; name exactly one")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"notebook {twice[0]!r} is named twice: name each notebook once")
    overrides = dict(parse_override(get_notebook(names[0]), k, v) for k, v in pairs)
    plans = [plan_run(get_notebook(n), args.profile, overrides) for n in names]  # all checks first
    jobs = _side_by_side(args.jobs, len(plans))
    from brorl_lib.figures import styles
    from brorl_lib.pipeline import manifest
    from brorl_lib.pipeline.runner import Look, check_look, set_aside_damaged_manifest

    look = Look(
        styles.resolve(args.style, "--style") if args.style is not None else styles.PAPER,
        styles.check_formats(["svg"] if args.svg else []),
        stamp=not args.no_stamp,
    )
    flag = "--style" if args.style is not None else "--svg" if args.svg else "--no-stamp"
    check_look(look, args.out if args.out is not None else FIGURES_DIR, flag)
    out = _out_folder(args, plans, overrides)
    try:
        manifest.load(out)
    except manifest.ManifestError as err:
        if not rebuild_manifest:
            raise manifest.ManifestError(
                f"{err} (`run` does not rebuild it: the other notebooks' files would go unrecorded)"
            ) from None
        kept = set_aside_damaged_manifest(out)
        problem = str(err).split("; ")[0]
        print(f"warning: {problem}; moved it to {manifest.shown(kept)}; rebuilding it from this run", file=sys.stderr)
    results = run_all(plans, out, look, jobs, force=args.force, log_output=not args.quiet and jobs == 1)
    if len(results) > 1:
        ran = [r for r in results if r.status == "ran"]
        print(
            f"{sum(r.verified for r in ran)} of {len(ran)} notebooks run reproduced their files byte for byte; "
            f"{len(results) - len(ran)} skipped (inputs unchanged); run log: build/run-log.jsonl",
            flush=True,
        )
    print(f"artifacts: {destination.shown(out)}/ (manifest: {destination.shown(manifest.path_of(out))})", flush=True)
    return 0


def _started(i: int, plans: list, look) -> None:
    """Say which notebook starts, with what profile and timeout, and how it differs from a committed run."""
    from brorl_lib.core import variants
    from brorl_lib.core.artifacts import changes_text

    plan, n = plans[i - 1], len(plans)
    print(f"[{i}/{n}] {plan.spec.name} (profile {plan.profile}, timeout {plan.timeout_s} s)", flush=True)
    variant = variants.describe(plan.spec, plan.profile, plan.parameters)
    if variant:
        print(
            f"[{i}/{n}] {plan.spec.name}: a variant of the {variant['profile']} profile "
            f"({changes_text(variant['changed'])}): its reproduced and scaled-down artifacts are stamped variant",
            flush=True,
        )
    if not look.is_default:
        print(f"[{i}/{n}] figures in style {look.style.label} as {', '.join(look.formats)}", flush=True)


def _finished(i: int, n: int, result: RunResult) -> None:
    if result.status == "skipped":
        verb = f"inputs unchanged since its last run here, skipped; {len(result.files)} files"
    else:
        verb = f"done in {result.wall_time_s} s; {_verdict(result)}"
    print(f"[{i}/{n}] {result.name}: {verb}", flush=True)


def run_all(plans: list, out: Path, look, jobs: int, force: bool, log_output: bool) -> list[RunResult]:
    """Run ``plans`` into ``out``, ``jobs`` side by side (each notebook its own kernel; their files are entered
    one notebook at a time). A failure or an interrupt starts no further notebook, stops the running ones and
    keeps what finished."""
    from concurrent.futures import FIRST_COMPLETED, wait

    from brorl_lib.pipeline.runner import run_notebook, stop_running, worker_pool

    results: dict[int, RunResult] = {}
    pool, stopped = worker_pool(jobs)
    waiting, running = list(range(1, len(plans) + 1)), {}
    try:
        while waiting or running:
            while waiting and len(running) < jobs:  # started here, one at a time, so a failure starts none after it
                i = waiting.pop(0)
                _started(i, plans, look)
                running[pool.submit(run_notebook, plans[i - 1], out, force=force, log_output=log_output, look=look)] = i
            done, _ = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)  # woken to take an interrupt
            for future in done:
                i = running.pop(future)
                results[i] = future.result()  # a failure raises here
                _finished(i, len(plans), results[i])
    except BaseException:
        stop_running(stopped)
        raise
    finally:
        pool.shutdown(wait=True)
    return [results[i] for i in sorted(results)]


def _cmd_status(out: Path, check: bool) -> int:
    """Exit 1 if a file's bytes differ from its recorded SHA-256 (or it is missing), if figures/ holds files made
    with other parameters than its profile's, or if the manifest is missing beside artifacts; with ``check``, also
    if an artifact is stale or a file not recorded."""
    from brorl_lib.pipeline import manifest

    if not manifest.exists(out):
        stray = manifest.unrecorded(out, {"artifacts": {}})
        for name in stray:
            print(f"NOT RECORDED  {name}")
        if stray:
            print(
                f"{manifest.shown(manifest.path_of(out))} is missing: {len(stray)} files in {out} are not recorded; "
                f"{manifest.fix_hint(out)}"
            )
            return 1
        print(f"0 of 0 artifacts in {out} are current")
        return 0
    recorded = manifest.load(out)  # names the file if it is unreadable
    problems = manifest.stale(out)
    damaged = [(name, reason) for name, reason in problems if reason in (manifest.MISSING, manifest.EDITED)]
    otherwise = manifest.made_otherwise(recorded, destination.FIGURES_PROFILE) if destination.is_figures(out) else []
    stray = manifest.unrecorded(out, recorded)
    for name, reason in problems:
        if reason == manifest.EDITED:
            print(f"CHANGED  {name}: its bytes differ from the SHA-256 in {manifest.MANIFEST_FILE}")
        elif reason == manifest.MISSING:
            print(f"MISSING  {name}: recorded in {manifest.MANIFEST_FILE}, not in {out}")
        else:
            print(f"STALE  {name}: {reason}")
    for name, how in otherwise:
        print(f"NOT COMMITTED PROFILE  {name}: {how}, not the {destination.FIGURES_PROFILE} profile figures/ holds")
    for name in stray:
        print(f"NOT RECORDED  {name}: no notebook made it (it is not in {manifest.MANIFEST_FILE})")
    total = len(recorded["artifacts"])
    summary = f"{total - len(problems)} of {total} artifacts in {out} are current"
    print(summary + (f"; {len(stray)} other files are not recorded" if stray else ""))
    if damaged or otherwise:
        print(
            f"{len(damaged)} files differ from what {manifest.MANIFEST_FILE} records or are missing, {len(otherwise)} "
            f"were made with other parameters than the {destination.FIGURES_PROFILE} profile's: "
            f"restore them (git checkout -- {manifest.shown(out)}) or re-make them (python -m brorl_lib reproduce)"
        )
        return 1
    return 1 if (check and (problems or stray)) else 0


def _reproduce(args) -> int:
    """Every notebook. The layout check of every figure in every preset is a test's work: ``make nbval`` runs it."""
    load_profile(args.profile)  # an unknown profile is named before matplotlib loads
    return _run([nb.name for nb in NOTEBOOKS], args, [], rebuild_manifest=True)


def _take_parameters(argv: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Pull every ``-p NAME VALUE`` out of ``argv`` before argparse sees it, so that a VALUE starting with
    '-' (-1e-3, -inf) is read as a value, not as an option."""
    rest, pairs, i = [], [], 0
    while i < len(argv):
        if argv[i] in ("-p", "--parameter") and i + 2 < len(argv):
            pairs.append((argv[i + 1], argv[i + 2]))
            i += 3
        else:
            rest.append(argv[i])
            i += 1
    return rest, pairs


def _side_by_side(jobs: int | None, count: int) -> int:
    """How many of ``count`` notebooks run at once: ``--jobs`` (at least 1), by default one per CPU."""
    if jobs is not None and jobs < 1:
        raise ValueError(f"--jobs {jobs} is not allowed: expected how many notebooks run at once, at least 1")
    return min(jobs or os.cpu_count() or 1, count)


def _refresh(names: list[str], jobs: int | None) -> int:
    jobs = _side_by_side(jobs, len(names))
    specs = [get_notebook(n) for n in names]  # every name checked before any work
    targets = []
    for spec in specs:
        given = plan_run(spec, spec.committed_profile).parameters if spec.committed_profile != "quick" else {}
        targets.append((spec.path, json.loads(json.dumps(given))))
    listed = ", ".join(f"{s.name} ({s.committed_profile} profile)" for s in specs)
    print(f"refreshing {len(specs)} notebook(s) in place, {jobs} at a time: {listed}", flush=True)
    from brorl_lib.pipeline.runner import refresh_notebooks

    refresh_notebooks(targets, jobs)
    return 0


def main(argv: list[str] | None = None) -> int:
    rest, pairs = _take_parameters(list(sys.argv[1:] if argv is None else argv))
    parser = _parser(with_help=bool({"-h", "--help"} & set(rest)))
    args = parser.parse_args(rest)
    if pairs and args.command != "run":
        parser.error("-p/--parameter applies to `run` only")
    args.parameter = [*getattr(args, "parameter", []), *pairs]
    try:
        if args.command == "list":
            return _cmd_list()
        if args.command == "params":
            return _cmd_params(args.names, args.write)
        if args.command == "status":
            return _cmd_status(args.out, args.check)
        # SIGTERM and SIGHUP (kill, timeout, a closed terminal) stop the kernels as Ctrl-C does, where they would
        # otherwise run on, orphaned; Ctrl-C works in a background job too
        what = f"python -m brorl_lib {args.command}"
        with stop_signals_raise(f"{what} and its kernels", lambda line: print(line, file=sys.stderr, flush=True)):
            if args.command == "run":
                return _run(args.names, args, args.parameter)
            if args.command == "reproduce":
                return _reproduce(args)
            return _refresh(args.names or [nb.name for nb in NOTEBOOKS], args.jobs)
    except Stopped as stop:
        print(f"{what} stopped on {stop.name}; the notebooks that finished keep their files", file=sys.stderr)
        return stop.status
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except RuntimeError as err:
        from brorl_lib.pipeline.runner import NotebookFailed  # loaded already when a notebook ran

        if not isinstance(err, NotebookFailed):
            raise
        print(f"error: {err}", file=sys.stderr)
        return 2
