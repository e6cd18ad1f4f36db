"""Command line: ``python -m brorl_lib list | run | reproduce | status | refresh``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from brorl_lib.core import manifest
from brorl_lib.core.paths import FIGURES_DIR
from brorl_lib.core.pipeline import NotebookFailed, refresh_notebook, run_notebook
from brorl_lib.core.profiles import available_profiles, parse_override, plan_run
from brorl_lib.core.registry import NOTEBOOKS, get_notebook


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m brorl_lib", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the notebooks, in run order")

    def add_run_args(p: argparse.ArgumentParser, default_profile: str) -> None:
        p.add_argument("--profile", default=default_profile, help=f"params/<profile>.yaml (default {default_profile})")
        p.add_argument("--out", type=Path, default=FIGURES_DIR, help="artifact folder (default figures/)")
        p.add_argument("--force", action="store_true", help="run even if inputs are unchanged")
        p.add_argument("--quiet", action="store_true", help="do not stream cell output")

    run = sub.add_parser("run", help="run some notebooks")
    run.add_argument("names", nargs="+", help="notebook names, e.g. 01_theory")
    run.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                     help="override one parameter (value read as YAML); only with one notebook")
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


def _run(names: list[str], args, overrides: dict) -> int:
    if overrides and len(names) != 1:
        raise ValueError("-p/--parameter applies to one notebook; name exactly one")
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


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "list":
            return _cmd_list()
        if args.command == "run":
            return _run(args.names, args, dict(parse_override(k, v) for k, v in args.parameter))
        if args.command == "reproduce":
            return _run([nb.name for nb in NOTEBOOKS], args, {})
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
