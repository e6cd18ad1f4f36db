"""Notebook 04's countdown study from a terminal, one stage at a time, with a profile's parameters:

    python -m brorl_lib.rlvr plateau --profile paper --set runs_dir=build/runs/my_study
    python -m brorl_lib.rlvr phase2 --profile paper --limit 4
    python -m brorl_lib.rlvr gradients --profile paper   # per-prompt gradient statistics, the best-N model
    python -m brorl_lib.rlvr status --profile paper      # where phase 2 and its learning-rate tunings stand

Every stage resumes where it stopped (the notebook reads the same folders back); ``--set NAME=VALUE`` overrides
one parameter (VALUE is YAML: ``--set seeds=[0,1]``).
"""

from __future__ import annotations

import argparse
import signal

import yaml

STAGES = ("screen", "plateau", "quality", "gradients", "phase2", "status")


def config_from(profile: str, overrides: list[str]):
    from brorl_lib.core.profiles import load_profile
    from brorl_lib.rlvr.study_config import CountdownStudyConfig

    values = CountdownStudyConfig.defaults() | load_profile(profile)["04_laptop_rlvr"]["parameters"]
    for item in overrides:
        name, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"--set {item!r} is not allowed: write NAME=VALUE")
        CountdownStudyConfig.parameter(name)  # names the parameters when this one is unknown
        values[name] = yaml.safe_load(text)
    return CountdownStudyConfig(**values)


def _stop(signum: int, frame) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m brorl_lib.rlvr", description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=STAGES)
    parser.add_argument("--profile", default="paper", help="a profile of params/profiles.yaml (default: paper)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a parameter")
    parser.add_argument("--limit", type=int, default=None, help="phase2: run at most this many arms, then stop")
    args = parser.parse_args(argv)
    cfg = config_from(args.profile, args.set)  # validated before any work
    for sig in (signal.SIGTERM, signal.SIGHUP):  # stop as Ctrl-C does: a run's lock is released, its checkpoint kept
        signal.signal(sig, _stop)
    from brorl_lib.rlvr import study, study_phase2

    root = cfg.runs_path()
    print(f"countdown study, stage {args.stage}, runs in {root}", flush=True)
    if args.stage == "screen":
        print(study.screen(cfg.study(), root).to_string())
    elif args.stage == "plateau":
        record = study.plateau_stage(cfg.study(), root)
        print({k: v for k, v in record.items() if k != "bands"})
    elif args.stage == "quality":
        study.update_quality_stage(cfg.study(), cfg.quality(), root)
    elif args.stage == "gradients":
        for name, record in study.gradient_stats_stage(cfg.study(), cfg.quality(), root).items():
            print(name, {k: v for k, v in record.items() if k != "checkpoint"})
    elif args.stage == "phase2":
        print(f"{study_phase2.run(cfg.study(), cfg.phase2(), root, limit=args.limit)} arms run")
    else:
        from brorl_lib.rlvr import study_report as sr

        print(sr.phase2_status(root, cfg.study(), cfg.phase2()))
        print(sr.tuning_table(*sr.tunings(root, cfg.study(), cfg.phase2())).to_string(index=False))


if __name__ == "__main__":
    main()
