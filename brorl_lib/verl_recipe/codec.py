"""A Reasoning Gym entry as JSON text and back, types intact.

verl hands the reward function only ``data_source``, ``solution_str``, ``ground_truth`` and
``extra_info``, so each parquet row carries its whole entry, which ``score_answer`` needs. Some
entries hold tuples (grids in ``arc_agi``/``rearc``, ranges in ``metadata.difficulty``); plain JSON
would turn them into lists and some verifiers then score a right answer as wrong. Tuples and sets
are therefore tagged; any other non-JSON type fails at encoding time, never silently.
"""

from __future__ import annotations

import json

_TUPLE, _SET = "__tuple__", "__set__"


def _tag(obj):
    if isinstance(obj, tuple):
        return {_TUPLE: [_tag(v) for v in obj]}
    if isinstance(obj, (set, frozenset)):
        return {_SET: [_tag(v) for v in sorted(obj, key=repr)]}
    if isinstance(obj, list):
        return [_tag(v) for v in obj]
    if isinstance(obj, dict):
        bad = [k for k in obj if not isinstance(k, str)]
        if bad:
            raise TypeError(f"entry dict keys must be strings, found {bad[:3]}")
        return {k: _tag(v) for k, v in obj.items()}
    if obj is None or isinstance(obj, (str, bool, int, float)):
        return obj
    raise TypeError(f"entry holds a {type(obj).__name__} ({obj!r:.60}), which has no JSON form here")


def _untag(obj):
    if isinstance(obj, dict):
        if len(obj) == 1 and _TUPLE in obj:
            return tuple(_untag(v) for v in obj[_TUPLE])
        if len(obj) == 1 and _SET in obj:
            return {_untag(v) for v in obj[_SET]}
        return {k: _untag(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_untag(v) for v in obj]
    return obj


def encode_entry(entry: dict) -> str:
    """JSON text of ``entry`` (sorted keys, so the same entry gives the same text)."""
    return json.dumps(_tag(entry), sort_keys=True, ensure_ascii=False, allow_nan=False)


def decode_entry(text: str) -> dict:
    """The entry ``encode_entry`` wrote, with its tuples and sets restored."""
    return _untag(json.loads(text))
