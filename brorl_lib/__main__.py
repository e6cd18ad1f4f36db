import sys

from brorl_lib.pipeline.cli import main

sys.exit(main())
