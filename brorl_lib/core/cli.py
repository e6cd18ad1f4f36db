"""Command line: ``python -m brorl_lib list | params | run | reproduce | status | refresh``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from brorl_lib.core import manifest
from brorl_lib.core.paths import FIGURES_DIR
from brorl_lib.core.pipeline import NotebookFailed, refresh_notebook, run_notebook, write_parameters_cell
from brorl_lib.core.profiles import available_profiles, parse_override, plan_run
from brorl_lib.core.registry import NOTEBOOKS, get_notebook


def _parser() -> argparse.ArgumentParser:
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
        p.add_argument("--profile", default=default_profile, help=f"params/<profile>.yaml (default {default_profile})")
        p.add_argument("--out", type=Path, default=FIGURES_DIR, help="artifact folder (default figures/)")
        p.add_argument("--force", action="store_true", help="run even if inputs are unchanged")
        p.add_argument("--quiet", action="store_true", help="do not stream cell output")

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
    add_run_args(sub.add_parser("reproduce", help="run every notebook in order"), "paper")

    status = sub.add_parser("status", help="list artifacts whose inputs changed since they were made")
    status.add_argument("--out", type=Path, default=FIGURES_DIR)
    status.add_argument("--check", action="store_true", help="exit 1 if any artifact is stale")

    refresh = sub.add_parser("refresh", help="re-execute notebooks/ in place with their defaults")
    refresh.add_argument("names", nargs="*", help="notebook names (default: all)")
    return ap


def _cmd_list() -> int:
    print(f"profiles: {', '.join(available_profiles())}")
    for i, nb in enumerate(NOTEBOOKS, 1):
        print(f"{i}. {nb.name:<20} {nb.title}")
    return 0


def _cmd_params(names: list[str], write: bool) -> int:
    for spec in [get_notebook(n) for n in names or [nb.name for nb in NOTEBOOKS]]:
        cell = spec.config_class().parameters_cell()
        if write:
            changed = write_parameters_cell(spec.path, cell)
            print(f"{spec.path.name}: parameters cell {'rewritten' if changed else 'already matches'}")
            continue
        print(f"{spec.name}: {spec.title}")
        for line in cell.splitlines():
            print(f"  {line}")
    return 0


def _run(names: list[str], args, pairs: list[tuple[str, str]]) -> int:
    if pairs and len(names) != 1:
        raise ValueError("-p/--parameter applies to one notebook; name exactly one")
    overrides = dict(parse_override(get_notebook(names[0]), k, v) for k, v in pairs)
    plans = [plan_run(get_notebook(n), args.profile, overrides) for n in names]  # all checks first
    for i, plan in enumerate(plans, 1):
        print(f"[{i}/{len(plans)}] {plan.spec.name} (profile {plan.profile}, timeout {plan.timeout_s} s)", flush=True)
        result = run_notebook(plan, args.out, force=args.force, log_output=not args.quiet)
        verb = "unchanged, skipped" if result.status == "skipped" else f"done in {result.wall_time_s} s"
        print(f"[{i}/{len(plans)}] {plan.spec.name}: {verb}; {len(result.files)} files in {args.out}", flush=True)
    return 0


def _cmd_status(out: Path, check: bool) -> int:
    problems = manifest.stale(out)
    total = len(manifest.load(out)["artifacts"])
    for name, reason in problems:
        print(f"STALE  {name}: {reason}")
    print(f"{total - len(problems)} of {total} artifacts in {out} are current")
    return 1 if (check and problems) else 0


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


def main(argv: list[str] | None = None) -> int:
    rest, pairs = _take_parameters(list(sys.argv[1:] if argv is None else argv))
    parser = _parser()
    args = parser.parse_args(rest)
    if pairs and args.command != "run":
        parser.error("-p/--parameter applies to `run` only")
    args.parameter = [*getattr(args, "parameter", []), *pairs]
    try:
        if args.command == "list":
            return _cmd_list()
        if args.command == "params":
            return _cmd_params(args.names, args.write)
        if args.command == "run":
            return _run(args.names, args, args.parameter)
        if args.command == "reproduce":
            return _run([nb.name for nb in NOTEBOOKS], args, [])
        if args.command == "status":
            return _cmd_status(args.out, args.check)
        names = args.names or [nb.name for nb in NOTEBOOKS]
        for spec in [get_notebook(n) for n in names]:
            print(f"refreshing {spec.path.name}", flush=True)
            refresh_notebook(spec.path)
        return 0
    except (ValueError, NotebookFailed) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
