"""pandas' tables in the book's notebook pages, presented without changing a value. In pandas' HTML tables: a plain
0, 1, 2, ... index column dropped, trailing zeros that pandas pads a column's decimals with trimmed (56.300000 ->
56.3, 1.000000e-16 -> 1e-16), a column's name allowed to break after an underscore. A table printed as text
(``to_string(index=False)``) too wide for the page's column is shown as an HTML table of the same cells, which
scrolls inside its box where a printed line would wrap."""

from __future__ import annotations

import html
import re

_TABLE = re.compile(r"<table\b[^>]*\bclass=\"dataframe\"[^>]*>.*?</table>", re.DOTALL)
_PART = re.compile(r"(<(thead|tbody)\b[^>]*>)(.*?)(</\2>)", re.DOTALL)
_ROW = re.compile(r"(<tr\b[^>]*>)(.*?)</tr>", re.DOTALL)
_CELL = re.compile(r"<(th|td)\b([^>]*)>(.*?)</\1>", re.DOTALL)
_DECIMAL = re.compile(r"^(-?\d+)\.(\d+)(e[-+]\d+)?$")

Cell = tuple[str, str, str]  # tag, attributes, content
Row = tuple[str, list[Cell]]  # the row's opening tag, its cells


def _rows(part: str) -> list[Row]:
    return [(opening, _CELL.findall(cells)) for opening, cells in _ROW.findall(part)]


def _row_html(row: Row, indent: str = "    ") -> str:
    opening, cells = row
    inner = "".join(f"\n{indent}  <{tag}{attrs}>{text}</{tag}>" for tag, attrs, text in cells)
    return f"{indent}{opening}{inner}\n{indent}</tr>"


def plain_index(head: list[Row], body: list[Row]) -> bool:
    """Whether the first column is pandas' default index: an unnamed header over the row numbers 0, 1, 2, ..."""
    if len(head) != 1 or not head[0][1] or head[0][1][0][0] != "th" or head[0][1][0][2].strip():
        return False
    width = len(head[0][1])
    for i, (_, cells) in enumerate(body):
        if len(cells) != width or cells[0][0] != "th" or cells[0][2].strip() != str(i):
            return False
        if any(tag == "th" for tag, _, _ in cells[1:]):
            return False
    return bool(body)


def _number(cell: Cell) -> re.Match | None:
    return _DECIMAL.match(cell[2].strip()) if cell[0] == "td" else None


def trim_decimals(body: list[Row]) -> list[Row]:
    """Each column's decimals cut to the most any of its numbers needs (a plain decimal keeps one at least): only
    zeros are removed, so every value reads as before."""
    width = max((len(cells) for _, cells in body), default=0)
    keep = [0] * width
    for _, cells in body:
        for j, cell in enumerate(cells):
            if match := _number(cell):
                keep[j] = max(keep[j], len(match[2].rstrip("0")))

    def trimmed(j: int, cell: Cell) -> Cell:
        match = _number(cell)
        if not match:
            return cell
        digits = match[2][: keep[j] if match[3] else max(keep[j], 1)]
        return cell[0], cell[1], match[1] + (f".{digits}" if digits else "") + (match[3] or "")

    return [(opening, [trimmed(j, c) for j, c in enumerate(cells)]) for opening, cells in body]


def breakable(name: str) -> str:
    """A column's name that may break after each underscore (``ci_low_seeds_prompts``), so that a header is no
    wider than its column's values need."""
    return name if "<wbr>" in name else re.sub(r"(<[^>]*>)|_", lambda m: m[1] or "_<wbr>", name)


def _tidy_table(table: str) -> str:
    parts = {m[2]: m for m in _PART.finditer(table)}
    if set(parts) != {"thead", "tbody"}:
        return table
    head, body = _rows(parts["thead"][3]), _rows(parts["tbody"][3])
    if plain_index(head, body):
        head = [(opening, cells[1:]) for opening, cells in head]
        body = [(opening, cells[1:]) for opening, cells in body]
    body = trim_decimals(body)
    head = [(opening, [(tag, attrs, breakable(text)) for tag, attrs, text in cells]) for opening, cells in head]
    for name, rows in (("thead", head), ("tbody", body)):
        match = parts[name]
        rebuilt = match[1] + "\n" + "\n".join(_row_html(r) for r in rows) + "\n  " + match[4]
        table = table.replace(match[0], rebuilt, 1)
    return table


def tidy_html(html: str) -> str:
    """``html`` (a text/html output) with every pandas table in it tidied; anything else as it is."""
    return _TABLE.sub(lambda m: _tidy_table(m[0]), html)


WIDE_TEXT = 100  # characters: a printed table wider than this would wrap in the page's column (our choice)
_HEAD = re.compile(r"\S+")


def text_table_cells(text: str) -> list[list[str]] | None:
    """The rows (the header first) of a table pandas printed with ``to_string(index=False)``, each cell stripped;
    None for any other text: fewer than two lines, lines of unequal length, a header with a space in a name, a
    cell not right-aligned under its header, no space between two columns, two values in one column."""
    lines = text.rstrip("\n").split("\n")
    if len(lines) < 2 or len({len(line) for line in lines}) != 1:
        return None
    ends = [m.end() for m in _HEAD.finditer(lines[0])]
    if not ends or ends[-1] != len(lines[0]):
        return None
    starts = [0, *ends[:-1]]
    rows = []
    for line in lines:
        cells = [line[a:b] for a, b in zip(starts, ends)]
        if any(c[:1] != " " for c in cells[1:]) or any(c.strip() and c.endswith(" ") for c in cells):
            return None
        if any("  " in c.strip() for c in cells):
            return None
        rows.append([c.strip() for c in cells])
    return rows


def text_table_html(text: str) -> str | None:
    """The printed table ``text`` (:func:`text_table_cells`) as an HTML table that the book styles as pandas' own,
    or None where ``text`` is no such table."""
    rows = text_table_cells(text)
    if rows is None:
        return None

    def row(tag: str, cells: list[str], shown=str) -> str:
        return "<tr>" + "".join(f"<{tag}>{shown(html.escape(c))}</{tag}>" for c in cells) + "</tr>"

    head, body = row("th", rows[0], breakable), "\n".join(row("td", r) for r in rows[1:])
    return f'<table class="dataframe">\n<thead>{head}</thead>\n<tbody>\n{body}\n</tbody>\n</table>'
