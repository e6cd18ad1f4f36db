"""Controls built from parameter declarations, so a control never offers a value the checks refuse.

``control(param)`` turns one ``Param`` into an ipywidget with its bounds, choices and default; an
explorer may narrow the range or offer a few values, each checked by the same ``Param.check`` first.
``value_of`` reads a control back as the parameter's value (text is read with ``Param.parse``, so a bad
entry raises the same ``ValueError`` as a profile or ``-p`` override). ``interactive_session`` tells a
kernel behind JupyterLab from a run under papermill or nbval, whose committed outputs must stay fixed.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Sequence

import ipywidgets as w

from brorl_lib.core.params import Param
from brorl_lib.core.paths import INTERACTIVE_ENV

SERVER_SESSION_ENV = "JPY_SESSION_NAME"  # set by jupyter_server for the kernels it starts (not papermill, nbval)
STATIC_MESSAGE = "explore: run this notebook in JupyterLab to use the controls"
_STYLE = {"description_width": "initial"}


def interactive_session() -> bool:
    """True when this kernel serves a live notebook (JupyterLab), False under papermill, nbval or a script.

    ``BRORL_INTERACTIVE=1`` or ``0`` decides explicitly (the pipeline sets 0); otherwise a kernel started
    by a Jupyter server is live."""
    value = os.environ.get(INTERACTIVE_ENV, "").strip()
    if value:
        if value not in ("0", "1"):
            raise ValueError(f"{INTERACTIVE_ENV}={value!r} is not allowed: expected 1 (controls) or 0 (static text)")
        return value == "1"
    return bool(os.environ.get(SERVER_SESSION_ENV))


def _checked(p: Param, value):
    """``value`` if the declaration allows it (as a list item for list parameters), else the check's error."""
    p.check([value] if p.is_list and not isinstance(value, (list, tuple)) else value)
    return value


def control(
    p: Param,
    value=None,
    *,
    low: float | None = None,
    high: float | None = None,
    options: Sequence | None = None,
    log: bool = False,
    step: float | None = None,
    description: str | None = None,
) -> w.Widget:
    """An ipywidget for parameter ``p`` starting at ``value`` (default: its declared default).

    ``low``/``high`` narrow the declared range, ``options`` offers only these values (list parameters:
    these items, any subset), ``log`` spaces a float slider logarithmically; the starting value is always
    within reach. Every bound and option is checked against the declaration first, so the control cannot
    reach a value the checks refuse."""
    value = p.default if value is None else value
    p.check(value)
    common = {
        "description": description or p.name,
        "tooltip": f"{p.doc}{f', in {p.unit}' if p.unit else ''}; {p.allowed()}",
        "style": _STYLE,
    }
    choices = tuple(options) if options is not None else p.choices
    for option in choices:
        _checked(p, option)
    if p.is_list:
        if choices:
            return w.SelectMultiple(options=list(choices), value=tuple(value), rows=min(len(choices), 6), **common)
        return w.Text(value=", ".join(json.dumps(v) for v in value), continuous_update=False, **common)
    if choices:
        if value not in choices:  # allowed (checked above), e.g. a profile's value: offered too
            choices = tuple(sorted({*choices, value})) if p.kind in ("int", "float") else (*choices, value)
        if p.kind in ("int", "float"):
            return w.SelectionSlider(options=list(choices), value=value, continuous_update=False, **common)
        return w.Dropdown(options=list(choices), value=value, **common)
    if p.kind == "bool":
        return w.Checkbox(value=value, indent=False, **common)
    if p.kind == "str":
        return w.Text(value=value, continuous_update=False, **common)
    lo = p.low if low is None else _checked(p, low)
    hi = p.high if high is None else _checked(p, high)
    if lo is None or hi is None:
        raise ValueError(f"{p.name}: a slider needs both bounds; pass low= and high= inside {p.allowed()}")
    lo, hi = min(lo, value), max(hi, value)  # a narrowed range still holds the starting value (it passed the check)
    if p.kind == "int":
        return w.IntSlider(
            value=value, min=lo, max=hi, step=step or (p.multiple_of or 1), continuous_update=False, **common
        )
    if log:
        if lo <= 0:
            raise ValueError(f"{p.name}: a log slider needs low > 0, got {lo!r}")
        return w.FloatLogSlider(
            value=value,
            base=10,
            min=math.log10(lo),
            max=math.log10(hi),
            step=step or 0.05,
            readout_format=".2e",
            continuous_update=False,
            **common,
        )
    return w.FloatSlider(value=value, min=lo, max=hi, step=step or (hi - lo) / 100, continuous_update=False, **common)


def value_of(p: Param, widget: w.Widget):
    """The control's value as the parameter's value; text is read like ``-p NAME TEXT`` (``Param.parse``)."""
    value = widget.value
    if p.is_list:
        if isinstance(widget, w.SelectMultiple):
            return list(value)
        text = value.strip()
        return p.parse(text if text.startswith("[") else f"[{text}]")
    if isinstance(widget, w.Text) and p.kind != "str":
        return p.parse(value)
    return value


def powers_of_two(p: Param, low: int | None = None, high: int | None = None) -> list[int]:
    """Every power of two the declaration of integer ``p`` allows, within ``low``..``high`` when given."""
    lo = max(v for v in (p.low, low, 1) if v is not None)
    hi = min(v for v in (p.high, high) if v is not None)
    values = [2**k for k in range(int(math.log2(hi)) + 1) if lo <= 2**k <= hi]
    for v in values:
        _checked(p, v)
    return values


class ConfigControls:
    """Controls for some parameters of one notebook's config, starting from ``base`` (a NotebookConfig).

    ``specs`` maps a parameter name to ``control``'s keyword arguments; ``extra`` adds controls that are
    not parameters (e.g. which table to show), read back as they are. ``read`` returns every control's value
    by name plus ``"_config"``: ``base`` with the declared ones replaced, checked like any other config
    (the same ValueError as a profile or ``-p`` would give)."""

    def __init__(self, base, specs: dict[str, dict], extra: dict[str, w.Widget] | None = None) -> None:
        self.base, self.cls = base, type(base)
        self.widgets = {
            name: control(self.cls.parameter(name), getattr(base, name), **spec) for name, spec in specs.items()
        }
        self.extra = dict(extra or {})

    @property
    def all(self) -> dict[str, w.Widget]:
        return {**self.widgets, **self.extra}

    def read(self, _values: dict | None = None) -> dict:
        declared = {name: value_of(self.cls.parameter(name), c) for name, c in self.widgets.items()}
        config = dataclasses.replace(self.base, **declared)
        return {**declared, **{k: c.value for k, c in self.extra.items()}, "_config": config}
