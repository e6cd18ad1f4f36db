"""The precision every artifact is written and drawn with, so that the same inputs give the same bytes on any machine.

float64 carries about 16 significant digits, but the last one or two differ between CPUs (numpy picks SIMD
versions of exp/log/pow by CPU), BLAS builds and thread counts. Figures and tables are therefore made from
values rounded once, here, to a fixed number of digits far above that noise:

* computed floats: ``SIGNIFICANT_DIGITS`` (10) significant digits. A difference of one unit in the 16th digit
  moves a 10-digit value only if it lies within that unit of a rounding boundary (about 1 value in 10^6).
  Numbers read from data/paper have 2-4 digits and pass unchanged.
* a column declared with ``declare(frame, decimals={...})``: a fixed number of decimal places. For
  quantities whose noise is absolute, such as the relative error of an identity (float64 round-off,
  1e-16 to 1e-13): at ``ERROR_DECIMALS`` (10) places, round-off reads 0.
* a column declared with ``declare(frame, scaled=[...])``: ``SIGNIFICANT_DIGITS`` digits of the column's
  largest magnitude, for a signed quantity that crosses zero (a value near zero carries the noise of the
  large terms it was summed from).

``rounded`` applies these rules; ``save_figure`` and ``save_table`` write what it returns, and every figure
function wrapped in ``rounded_inputs`` draws from it, so a figure and its CSV hold the same numbers.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterable, Mapping

import numpy as np
import pandas as pd

SIGNIFICANT_DIGITS = 10
_CALLS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # figure -> the call that drew it
ERROR_DECIMALS = 10
_RULES = "brorl_precision"  # key in DataFrame.attrs: {column: ("decimals", n) | ("scaled", digits)}


def _round(values, spec: str):
    """``values`` (a float, array or Series) through the format ``spec``; -0.0 becomes 0.0. Decimal rounding of
    the exact binary value (Python's formatting), so it is the same on every machine."""
    if isinstance(values, pd.Series):
        return pd.Series(_round(values.to_numpy(dtype=float), spec), index=values.index, name=values.name)
    if np.ndim(values) == 0:
        return float(format(float(values), spec)) + 0.0
    arr = np.asarray(values, dtype=float)
    return np.asarray([float(format(v, spec)) for v in arr.ravel().tolist()], dtype=float).reshape(arr.shape) + 0.0


def round_significant(values, digits: int = SIGNIFICANT_DIGITS):
    """``values`` rounded to ``digits`` significant digits (see ``_round``)."""
    return _round(values, f".{digits}g")


def round_decimals(values, decimals: int):
    """``values`` rounded to ``decimals`` decimal places (see ``_round``)."""
    return _round(values, f".{decimals}f")


def declare(
    frame: pd.DataFrame, *, decimals: Mapping[str, int] | None = None, scaled: Iterable[str] = ()
) -> pd.DataFrame:
    """Record on ``frame`` (in place; returned for chaining) how columns other than the default are rounded."""
    rules = dict(frame.attrs.get(_RULES, {}))
    for column, places in (decimals or {}).items():
        rules[column] = ("decimals", int(places))
    for column in scaled:
        rules[column] = ("scaled", SIGNIFICANT_DIGITS)
    unknown = sorted(set(rules) - set(frame.columns))
    if unknown:
        raise ValueError(f"declare: columns {unknown} are not in the frame (columns: {list(frame.columns)})")
    frame.attrs[_RULES] = rules
    return frame


def _round_column(column: pd.Series, rule: tuple[str, int] | None) -> pd.Series:
    if rule is None:
        return round_significant(column)
    kind, n = rule
    if kind == "decimals":
        return round_decimals(column, n)
    finite = np.abs(column.to_numpy(dtype=float))
    finite = finite[np.isfinite(finite)]
    largest = float(finite.max()) if finite.size else 0.0
    if largest == 0.0:
        return round_significant(column)
    # n digits of the largest magnitude: a fixed number of decimal places for the whole column
    places = n - 1 - int(f"{largest:.{n - 1}e}".split("e")[1])  # decimal exponent, read exactly
    return round_decimals(column, places) if places <= 340 else round_significant(column)


def rounded(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` with every float column rounded by its declared rule (default: significant digits)."""
    rules = frame.attrs.get(_RULES, {})
    out = frame.copy()
    for name in out.columns:
        if pd.api.types.is_float_dtype(out[name]):
            out[name] = _round_column(out[name], rules.get(name))
    return out


def _rounded_value(value):
    if isinstance(value, pd.DataFrame):
        return rounded(value)
    if isinstance(value, pd.Series) and pd.api.types.is_float_dtype(value):
        return round_significant(value)
    if isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.floating):
        return round_significant(value)
    if isinstance(value, float | np.floating):
        return round_significant(value)
    if isinstance(value, dict):
        return {k: _rounded_value(v) for k, v in value.items()}
    return value


def rounded_inputs(plot: Callable) -> Callable:
    """Decorator for a figure function: every float it receives (frames, series, arrays, floats, dict values)
    is rounded as ``rounded`` does, so the figure is drawn from the numbers its CSV holds."""

    @functools.wraps(plot)
    def wrapper(*args, **kwargs):
        args, kwargs = tuple(_rounded_value(a) for a in args), {k: _rounded_value(v) for k, v in kwargs.items()}
        fig = plot(*args, **kwargs)
        try:
            _CALLS[fig] = (plot, args, kwargs)  # so the layout check can draw it again in another style
        except TypeError:  # not a figure (weak references refused)
            pass
        return fig

    return wrapper


def call_of(fig) -> tuple[Callable, tuple, dict] | None:
    """(figure function, rounded args, rounded kwargs) that drew ``fig`` through ``rounded_inputs``."""
    return _CALLS.get(fig)
