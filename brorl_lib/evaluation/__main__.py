"""``python -m brorl_lib.evaluation --help``."""

from brorl_lib.evaluation.cli import main

raise SystemExit(main())
