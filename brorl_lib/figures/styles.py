"""Figure styles: presets (``paper``, what ``figures/`` holds, from ``paper.mplstyle``; venues' sizes from tueplots)
or a user's ``.mplstyle`` file (``resolve``), each with its medium's widths and height in inches, and the style in
force (``active``: ``using``'s, else ``BRORL_FIGURE_STYLE``'s, which the pipeline sets, else ``paper``)."""

from __future__ import annotations

import hashlib
import os
import re
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib as mpl
from tueplots import figsizes, fontsizes

from brorl_lib.core.style_files import check_fonts, read_style_file, sizes

STYLE_ENV = "BRORL_FIGURE_STYLE"  # a preset name or the absolute path of a style file
STAMP_ENV = "BRORL_FIGURE_STAMP"  # "0": no provenance stamp in the image (class kept in metadata and caption)
FORMATS_ENV = "BRORL_FIGURE_FORMATS"  # comma-separated: "pdf,png" (the default) or "pdf,png,svg"
FORMATS, OPTIONAL_FORMATS, DEFAULT = ("pdf", "png"), ("svg",), "paper"
PAPER_FONT_PT = 8.0  # the paper preset's type size: every size a figure function writes is in its terms
PAPER_STYLE_FILE = Path(__file__).with_name("paper.mplstyle")
TEXT_HEIGHT_IN = 9.0  # a page's text height: US letter with 1-in margins (our choice for the paper media)
SLIDE_HEIGHT_IN = 3.54  # a 16:9 beamer frame (160 x 90 mm)


@dataclass(frozen=True)
class FigureStyle:
    """rcParams and the medium's sizes (inches); ``path``/``sha256`` for a style file."""

    name: str
    description: str
    rc: Mapping[str, object] = field(repr=False)
    column_in: float
    full_in: float
    height_in: float = TEXT_HEIGHT_IN
    path: str = ""
    sha256: str = ""

    font_pt = property(lambda self: float(self.rc["font.size"]))
    scale = property(lambda self: self.font_pt / PAPER_FONT_PT)  # what sizes written for the paper are multiplied by

    def width(self, kind: str) -> float:
        if kind not in ("column", "full"):
            raise ValueError(f"width={kind!r} is not allowed: choose 'column' or 'full'")
        return self.column_in if kind == "column" else self.full_in

    label = property(lambda self: f"{Path(self.path).name} (sha256 {self.sha256[:12]})" if self.path else self.name)
    is_default = property(lambda self: self.name == DEFAULT and not self.path)


PAPER_RC = read_style_file(PAPER_STYLE_FILE, "the paper style")
_SIZE_KEYS = {k: PAPER_RC[k] / PAPER_RC["font.size"] for k in PAPER_RC if k.endswith("size") and k != "font.size"}


def _venue(name: str, description: str, sizes: dict, widths, height_in: float) -> FigureStyle:
    """The paper style with a venue's type ``sizes`` and widths (a tueplots ``figsizes`` function: the full
    width, and half of it for a one-column figure)."""
    full, half = (widths(**kw)["figure.figsize"][0] for kw in ({}, {"rel_width": 0.5}))
    return FigureStyle(name, description, {**PAPER_RC, **sizes}, half, full, height_in)


_TIMES = {**PAPER_RC, "font.family": "serif", "font.serif": ["STIXGeneral"], "mathtext.fontset": "stix"}
PRESETS: dict[str, FigureStyle] = {
    "paper": FigureStyle("paper", "two-column paper (the default): 3.25 or 6.75 in, 8 pt", PAPER_RC, 3.25, 6.75),
    "journal": _venue("journal", "single-column journal (JMLR's sizes, tueplots): 3 or 6 in, 9.95 pt",
                      fontsizes.jmlr2001(), figsizes.jmlr2001, TEXT_HEIGHT_IN),
    "slides": _venue("slides", "16:9 beamer slides (tueplots): 2.76 or 4.96 in wide, at most 3.54 in high, 9 pt",
                     fontsizes.beamer(), figsizes.beamer_169, SLIDE_HEIGHT_IN),
    "times": FigureStyle("times", "two-column paper in STIX, a Times-like serif shipped with matplotlib, 8 pt",
                         _TIMES, 3.25, 6.75),
}  # fmt: skip
PAPER = PRESETS[DEFAULT]


def from_file(path: Path, flag: str = "--style") -> FigureStyle:
    """A style from a ``.mplstyle`` file: the paper style with the file's settings on top. Its
    ``figure.figsize`` width is every figure's width (else the paper's widths); a ``font.size`` without the other
    sizes scales them all."""
    path = Path(path)
    rc, where = read_style_file(path, flag), f"{flag} {path}"
    font_pt, width = sizes(rc, where, PAPER_FONT_PT)
    scaled = {**PAPER_RC, "font.size": font_pt, **{k: round(r * font_pt, 2) for k, r in _SIZE_KEYS.items()}}
    merged = {**(scaled if "font.size" in rc else PAPER_RC), **rc}
    column_in, full_in = (width, width) if width else (PAPER.column_in, PAPER.full_in)
    check_fonts(merged, where)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return FigureStyle(path.stem, f"style file {path}", merged, column_in, full_in, TEXT_HEIGHT_IN,
                       str(path.resolve()), digest)  # fmt: skip


def resolve(text: str, flag: str = "--style", base: Path | None = None) -> FigureStyle:
    """A preset by name, or a style file by path (relative paths from ``base``, default the working folder)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{flag} needs a preset ({', '.join(PRESETS)}) or the path of a .mplstyle file")
    text = text.strip()
    if text in PRESETS:
        return PRESETS[text]
    path = Path(text).expanduser()
    path = Path(base) / path if not path.is_absolute() and base is not None else path
    if path.exists() or re.search(r"[/\\]", text) or text.endswith(".mplstyle") or text.startswith(("~", ".")):
        return from_file(path, flag)
    raise ValueError(f"{flag} {text!r} is not a preset ({', '.join(PRESETS)}) or an existing .mplstyle file")


def check_formats(formats: str | tuple[str, ...] | list[str], flag: str = "--formats") -> tuple[str, ...]:
    """PDF and PNG always, then each optional format asked for (SVG), in a fixed order."""
    asked = [f.strip().lower() for f in (formats.split(",") if isinstance(formats, str) else formats) if f.strip()]
    bad = [f for f in asked if f not in FORMATS + OPTIONAL_FORMATS]
    if bad:
        raise ValueError(f"{flag} {','.join(bad)} is not allowed: formats are {', '.join(FORMATS + OPTIONAL_FORMATS)}")
    return FORMATS + tuple(f for f in OPTIONAL_FORMATS if f in asked)


# --- the style in force ---
_override: list[FigureStyle] = []
_from_env: dict[tuple[str, float], FigureStyle] = {}
DRAWN_IN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # figure -> the style it was drawn in


def _env_style() -> FigureStyle:
    text = os.environ.get(STYLE_ENV, "").strip()
    if not text or text == DEFAULT:
        return PAPER
    try:
        key = (text, Path(text).stat().st_mtime if text not in PRESETS else 0.0)
    except OSError:
        key = (text, -1.0)
    if key not in _from_env:
        _from_env[key] = resolve(text, STYLE_ENV)
    return _from_env[key]


def drawn_in(fig) -> FigureStyle:
    """The style ``fig`` was drawn in (``new_figure`` records it), else the style in force."""
    return DRAWN_IN.get(fig) or active()


def active() -> FigureStyle:
    return _override[-1] if _override else _env_style()


def formats() -> tuple[str, ...]:  # what save_figure writes now
    return check_formats(os.environ.get(FORMATS_ENV, ",".join(FORMATS)), FORMATS_ENV)


@contextmanager
def using(style: FigureStyle) -> Iterator[FigureStyle]:
    """Draw figures in ``style`` inside the block (e.g. to save an explored figure in another style)."""
    _override.append(style)
    try:
        yield style
    finally:
        _override.pop()


_baseline: dict[str, object] = {}  # rcParams as they were before any style here changed them


def apply(style: FigureStyle) -> None:
    """Set rcParams to ``style``; keys another style set and this one does not go back to what they were."""
    for key in style.rc:
        _baseline.setdefault(key, mpl.rcParams[key])
    mpl.rcParams.update({k: v for k, v in _baseline.items() if k not in style.rc})
    mpl.rcParams.update(style.rc)
