import sys

from brorl_lib.core.cli import main

sys.exit(main())
