"""The README's results-at-a-glance block, from the same source as the book's table (``book.glance``).

``python -m brorl_lib.book.readme`` rewrites the block between its two markers in README.md from ``figures/``;
``--check`` changes nothing and exits 1 if the block differs from what the source gives (the unit tests check
the same). The book shows the same rows in place of the block, rendered for Sphinx (``book.build``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from brorl_lib.book.glance import readme_markdown
from brorl_lib.core import atomic
from brorl_lib.core.paths import FIGURES_DIR, REPO_ROOT
from brorl_lib.pipeline import manifest

README = REPO_ROOT / "README.md"
START = "<!-- results at a glance: made by `python -m brorl_lib.book.readme` from figures/ (book/glance.py) -->"
END = "<!-- end of the results at a glance -->"


def with_block(text: str, block: str) -> str:
    """``text`` with what lies between the markers replaced by ``block``; ValueError if the markers are not there
    once each, in order."""
    if text.count(START) != 1 or text.count(END) != 1 or text.index(START) > text.index(END):
        raise ValueError(f"README.md needs the markers {START!r} and {END!r} once each, in that order")
    head, rest = text.split(START)
    _, tail = rest.split(END)
    return f"{head}{START}\n{block.rstrip()}\n{END}{tail}"


def generated(text: str, figures: Path = FIGURES_DIR) -> str:
    """``text`` (the README) with its block as ``figures/`` and its manifest give it."""
    return with_block(text, readme_markdown(manifest.load(figures), figures))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m brorl_lib.book.readme", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the block differs; write nothing")
    args = ap.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    try:
        new = generated(text)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if new == text:
        print("README.md: the results at a glance already match figures/")
        return 0
    if args.check:
        print("README.md: the results at a glance differ from figures/; run python -m brorl_lib.book.readme")
        return 1
    atomic.write_text(README, new)
    print("README.md: the results at a glance rewritten from figures/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
