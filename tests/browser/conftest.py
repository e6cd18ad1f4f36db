"""Headless Chromium for the browser tests: Debian's package (`make browser-deps`), driven through Playwright."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

playwright = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[dev]' installs playwright")

CHROMIUM = os.environ.get("BRORL_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [  # headless on a closed network: no background connections (they are refused and slow it down)
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser():
    """One Chromium for every browser test, closed at the end."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: run `make browser-deps` (Debian's package 'chromium')")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()
