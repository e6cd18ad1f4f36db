"""``python -m brorl_lib.evaluation --help``."""

from brorl_lib.evaluation.cli import main

if __name__ == "__main__":  # vLLM starts its engine in a spawned process, which imports this module again
    raise SystemExit(main())
