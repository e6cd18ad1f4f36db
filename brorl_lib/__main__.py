import sys

from brorl_lib.cli import main

sys.exit(main())
