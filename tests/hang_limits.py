"""Wall-clock limits of the tests: each catches a hang, never slowness.

A command or wait that takes seconds to a minute on 2 idle cores gets ``HANG_S``; on a machine kept busy (load 10
on 2 cores was seen to slow a step about fivefold) that still leaves a wide margin, and a hung command is
still stopped within minutes rather than at CI's limit. Our choice; ``BRORL_TEST_HANG_S`` sets another.
"""

import os

HANG_S = float(os.environ.get("BRORL_TEST_HANG_S", 600))
