"""Reading a user's ``.mplstyle`` file: every line checked by matplotlib's own validators, every refusal a
ValueError naming the flag, the file and the line, before any figure is drawn (``figures.styles.from_file``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib as mpl
from matplotlib import font_manager

_NOT_STYLE = {  # rcParams that are no part of a look (matplotlib ignores them in style files too): refused
    *"backend backend_fallback interactive toolbar timezone date.epoch figure.max_open_warning".split(),
    *"figure.raise_window savefig.directory tk.window_focus docstring.hardcopy".split(),
    *"webagg.port webagg.address webagg.port_retries webagg.open_in_browser".split(),
}


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


def check_fonts(rc: Mapping[str, object], where: str) -> None:
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


WIDTH_RANGE_IN, FONT_RANGE_PT = (1.0, 30.0), (4.0, 40.0)  # bounds for a style file (our choices)


def sizes(rc: Mapping[str, object], where: str, default_pt: float) -> tuple[float, float | None]:
    """The file's type size (``default_pt`` if unset) and figure width (None if unset), each within its bounds."""
    font_pt = float(rc.get("font.size", default_pt))
    if not FONT_RANGE_PT[0] <= font_pt <= FONT_RANGE_PT[1]:
        raise ValueError(f"{where}: font.size {font_pt:g} is not allowed: expected {FONT_RANGE_PT[0]:g} to "
                         f"{FONT_RANGE_PT[1]:g} points")  # fmt: skip
    width = float(rc["figure.figsize"][0]) if "figure.figsize" in rc else None
    if width is not None and not WIDTH_RANGE_IN[0] <= width <= WIDTH_RANGE_IN[1]:
        raise ValueError(f"{where}: figure.figsize width {width:g} in is not allowed: expected "
                         f"{WIDTH_RANGE_IN[0]:g} to {WIDTH_RANGE_IN[1]:g} inches")  # fmt: skip
    return font_pt, width
