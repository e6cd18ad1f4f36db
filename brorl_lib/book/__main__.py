import sys

from brorl_lib.book.build import main

sys.exit(main())
