"""Figure styles: named presets or a user's own ``.mplstyle`` file, and the style figures are drawn in now.

A style is matplotlib's rcParams and its medium's sizes in inches: ``column`` (a one-column figure's width),
``full`` (the text width) and ``height`` (the tallest a figure may be: the text's or the slide's). ``paper``
(``paper.mplstyle`` beside this module) is what ``figures/`` is made with; the other presets take a venue's
widths and type sizes from tueplots. ``resolve(text)`` reads a preset name or a style file and refuses bad
input (an unknown name, a malformed file, a font this machine lacks) naming the flag, before anything runs.
The pipeline hands the chosen style to a notebook's kernel in ``BRORL_FIGURE_STYLE`` (extra formats in
``BRORL_FIGURE_FORMATS``); ``active()`` is ``using(style)``'s if set, else the environment's, else ``paper``.
"""

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
from matplotlib import font_manager
from tueplots import figsizes, fontsizes

STYLE_ENV = "BRORL_FIGURE_STYLE"  # a preset name or the absolute path of a style file
STAMP_ENV = "BRORL_FIGURE_STAMP"  # "0": no provenance stamp in the image (class kept in metadata and caption)
FORMATS_ENV = "BRORL_FIGURE_FORMATS"  # comma-separated: "pdf,png" (the default) or "pdf,png,svg"
FORMATS, OPTIONAL_FORMATS, DEFAULT = ("pdf", "png"), ("svg",), "paper"
PAPER_FONT_PT = 8.0  # the paper preset's type size: every size a figure function writes is in its terms
PAPER_STYLE_FILE = Path(__file__).with_name("paper.mplstyle")
TEXT_HEIGHT_IN = 9.0  # a page's text height: US letter with 1-in margins (our choice for the paper media)
SLIDE_HEIGHT_IN = 3.54  # a 16:9 beamer frame (160 x 90 mm)
_NOT_STYLE = {  # rcParams that are no part of a look (matplotlib ignores them in style files too): refused
    *"backend backend_fallback interactive toolbar timezone date.epoch figure.max_open_warning".split(),
    *"figure.raise_window savefig.directory tk.window_focus docstring.hardcopy".split(),
    *"webagg.port webagg.address webagg.port_retries webagg.open_in_browser".split(),
}
WIDTH_RANGE_IN, FONT_RANGE_PT = (1.0, 30.0), (4.0, 40.0)  # bounds for a style file (our choices)


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

    @property
    def font_pt(self) -> float:
        return float(self.rc["font.size"])

    @property
    def scale(self) -> float:
        """This style's type size over the paper's: sizes written for the paper are multiplied by it."""
        return self.font_pt / PAPER_FONT_PT

    def width(self, kind: str) -> float:
        if kind not in ("column", "full"):
            raise ValueError(f"width={kind!r} is not allowed: choose 'column' or 'full'")
        return self.column_in if kind == "column" else self.full_in

    @property
    def label(self) -> str:
        """What files and the manifest record: the preset's name, or the file's name and content hash."""
        return f"{Path(self.path).name} (sha256 {self.sha256[:12]})" if self.path else self.name

    @property
    def is_default(self) -> bool:
        return self.name == DEFAULT and not self.path


def _strip_comment(line: str) -> str:
    """The line without its ``#`` comment (a ``#`` inside quotes, e.g. a colour, stays)."""
    quote = None
    for i, ch in enumerate(line):
        if ch in "\"'" and quote in (None, ch):
            quote = None if quote else ch
        elif ch == "#" and quote is None:
            return line[:i]
    return line


def read_style_file(path: Path, flag: str = "--style") -> dict[str, object]:
    """The rcParams a ``.mplstyle`` file sets, each checked by matplotlib's own validator; a ValueError naming
    ``flag``, the file and the line for anything matplotlib would ignore or refuse."""
    if not path.is_file():
        raise ValueError(f"{flag} {path}: no such style file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{flag} {path}: cannot read the style file ({type(err).__name__}: {err})") from None
    rc: dict[str, object] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw).strip()
        if not line:
            continue
        where = f"{flag} {path} line {number} ({raw.strip()!r})"
        key, sep, value = (part.strip() for part in line.partition(":"))
        if not sep or not key:
            raise ValueError(f"{where}: expected 'key: value', as in matplotlib's style files")
        if key not in mpl.rcParams:
            raise ValueError(f"{where}: {key!r} is not a matplotlib setting (rcParams)")
        if key in _NOT_STYLE:
            raise ValueError(f"{where}: {key!r} is not part of a figure's look; remove it")
        try:
            rc[key] = mpl.rcParams.validate[key](value[1:-1] if value[:1] == value[-1:] == '"' else value)
        except (ValueError, TypeError) as err:
            raise ValueError(f"{where}: {err}") from None
    if not rc:
        raise ValueError(f"{flag} {path}: the style file sets nothing (expected lines such as 'font.size: 9')")
    return rc


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


def _check_fonts(rc: Mapping[str, object], where: str) -> None:
    """Every family the style names must be installed: matplotlib would silently draw in another."""
    families = rc.get("font.family") or []
    with mpl.rc_context({k: v for k, v in rc.items() if k.startswith("font.")}):
        for family in [families] if isinstance(families, str) else list(families):
            try:
                font_manager.fontManager.findfont(family, fallback_to_default=False, rebuild_if_missing=False)
            except ValueError:
                raise ValueError(
                    f"{where}: font family {family!r} is not installed here; name an installed one, or use the "
                    f"'times' preset for a Times-like serif (STIX, shipped with matplotlib)"
                ) from None


def from_file(path: Path, flag: str = "--style") -> FigureStyle:
    """A style from a ``.mplstyle`` file: the paper style with the file's settings on top. Its
    ``figure.figsize`` width is every figure's width (else the paper's widths); a ``font.size`` without the other
    sizes scales them all."""
    path = Path(path)
    rc, where = read_style_file(path, flag), f"{flag} {path}"
    font_pt = float(rc.get("font.size", PAPER_FONT_PT))
    if not FONT_RANGE_PT[0] <= font_pt <= FONT_RANGE_PT[1]:
        raise ValueError(f"{where}: font.size {font_pt:g} is not allowed: expected {FONT_RANGE_PT[0]:g} to "
                         f"{FONT_RANGE_PT[1]:g} points")  # fmt: skip
    scaled = {**PAPER_RC, "font.size": font_pt, **{k: round(r * font_pt, 2) for k, r in _SIZE_KEYS.items()}}
    merged = {**(scaled if "font.size" in rc else PAPER_RC), **rc}
    column_in, full_in = PAPER.column_in, PAPER.full_in
    if "figure.figsize" in rc:
        width = float(rc["figure.figsize"][0])
        if not WIDTH_RANGE_IN[0] <= width <= WIDTH_RANGE_IN[1]:
            raise ValueError(f"{where}: figure.figsize width {width:g} in is not allowed: expected "
                             f"{WIDTH_RANGE_IN[0]:g} to {WIDTH_RANGE_IN[1]:g} inches")  # fmt: skip
        column_in = full_in = width
    _check_fonts(merged, where)
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
    """The style ``fig`` was drawn in (``figures.plotting.new_figure`` records it), else the style in force."""
    return DRAWN_IN.get(fig) or active()


def active() -> FigureStyle:
    """The style figures are drawn in now: ``using``'s, else the environment's (the pipeline's), else paper."""
    return _override[-1] if _override else _env_style()


def formats() -> tuple[str, ...]:
    """The formats ``save_figure`` writes now (PDF and PNG; SVG too when the run asked for it)."""
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
