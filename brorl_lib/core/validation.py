"""Parameter checks that fail early with a message naming the parameter and what is allowed."""

from __future__ import annotations

import math
from collections.abc import Iterable
from numbers import Integral, Real


def check_type(name: str, value, kind: type | tuple[type, ...], what: str) -> None:
    """``value`` must be an instance of ``kind`` (bool is never accepted as a number)."""
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise ValueError(f"{name}={value!r} is not allowed: expected {what}")
    if not isinstance(value, kind):
        raise ValueError(f"{name}={value!r} is not allowed: expected {what}")


def check_finite(name: str, value) -> None:
    """A real number that is neither NaN nor infinite."""
    check_type(name, value, Real, "a number")
    if not isinstance(value, Integral) and not math.isfinite(value):
        raise ValueError(f"{name}={value!r} is not allowed: expected a finite number")


def check_range(name: str, value, low: Real | None = None, high: Real | None = None) -> None:
    """low <= value <= high (either bound optional), never NaN or infinite; ints stay ints."""
    check_finite(name, value)
    if (low is not None and value < low) or (high is not None and value > high):
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        raise ValueError(f"{name}={value!r} is out of range: allowed {lo} <= {name} <= {hi}")


def check_int(name: str, value, low: int | None = None, high: int | None = None) -> None:
    """An integer in [low, high]."""
    check_type(name, value, Integral, "an integer")
    check_range(name, value, low, high)


def check_positive(name: str, value) -> None:
    """A finite real number > 0."""
    check_type(name, value, Real, "a number")
    if not value > 0:
        raise ValueError(f"{name}={value!r} is not allowed: must be > 0")
    check_finite(name, value)


def check_choice(name: str, value, allowed: Iterable) -> None:
    """One of ``allowed``."""
    allowed = tuple(allowed)
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not allowed: choose one of {list(allowed)}")


def check_int_list(name: str, values, low: int | None = None, high: int | None = None) -> None:
    """A non-empty list of integers, each in [low, high]."""
    check_type(name, values, (list, tuple), "a non-empty list of integers")
    if not values:
        raise ValueError(f"{name}=[] is not allowed: expected a non-empty list of integers")
    for v in values:
        check_int(f"{name} item", v, low, high)
