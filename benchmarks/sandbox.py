"""Cost of the code sandbox's OS isolation: samples scored per second with it (bubblewrap) against without it
(``Limits(unsafe_no_sandbox=True)``: a bare subprocess with the same bootstrap), on the same programs, measured
in the same run, the two modes alternating round by round so that drifts in machine load hit both alike.

The programs are a mix of what a model writes for the code benchmarks: a correct stdin/stdout solution, a
correct called function (APPS ``fn_name`` style), a wrong answer and one that does not compile, each scored on
its tests (3, 2, 3 and 3 tests). Usage:

    .venv/bin/python benchmarks/sandbox.py [--rounds 5] [--workers 1]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor

from brorl_lib.evaluation.sandbox import Limits, run_tests

ADD = {"inputs": ["1 2\n", "3 4\n", "10 -5\n"], "outputs": ["3\n", "7\n", "5"]}
CALL = {"inputs": [[1, 2], [3, 4]], "outputs": [[3], [7]], "fn_name": "add"}
PROGRAMS = [
    ("a, b = map(int, input().split())\nprint(a + b)\n", ADD),
    ("class Solution:\n    def add(self, a, b):\n        return a + b\n", CALL),
    ("print(sum(range(10**5)) % 7)\n", ADD),
    ("def f(:\n", ADD),
]


def samples_per_second(limits: Limits, samples: int, workers: int) -> float:
    """Programs of PROGRAMS (cycled) scored per second, ``workers`` at a time."""
    jobs = [PROGRAMS[i % len(PROGRAMS)] for i in range(samples)]
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda job: run_tests(job[0], job[1], limits), jobs))
    return samples / (time.perf_counter() - start)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds per mode")
    p.add_argument("--samples", type=int, default=20, help="samples per round")
    p.add_argument("--workers", type=int, default=1, help="samples scored in parallel")
    args = p.parse_args()
    modes = {"sandbox (bwrap)": Limits(), "bare subprocess": Limits(unsafe_no_sandbox=True)}
    for limits in modes.values():
        samples_per_second(limits, len(PROGRAMS), args.workers)  # warm-up: probe, page cache
    rates: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(args.rounds):
        for name, limits in modes.items():
            rates[name].append(samples_per_second(limits, args.samples, args.workers))
    best = {name: max(r) for name, r in rates.items()}
    for name, r in rates.items():
        print(
            f"{name:>16}: {best[name]:6.1f} samples/s (best of {args.rounds} rounds; median "
            f"{sorted(r)[len(r) // 2]:.1f}), {args.workers} worker(s)"
        )
    print(f"isolation costs {best['bare subprocess'] / best['sandbox (bwrap)']:.2f}x the time of a bare subprocess")


if __name__ == "__main__":
    main()
