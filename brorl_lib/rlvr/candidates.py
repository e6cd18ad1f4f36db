"""The configurations the regime screen tries: task families with their difficulty, and a model size, written
``"arithmetic:3@128x3"`` (one task) or ``"spell_backward:6+word_sequence_reversal:3@64x2"`` (tasks mixed)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from brorl_lib.core.validation import check_choice, check_int
from brorl_lib.models import qwen2
from brorl_lib.models.tiny import TinyModelShape
from brorl_lib.rlvr import tasks

HEADS, KV_HEADS = 4, 2  # our choice for every model size: grouped-query attention as in Qwen2
_SPEC = re.compile(r"^(?P<tasks>[a-z_]+:\d+(?:\+[a-z_]+:\d+)*)@(?P<hidden>\d+)x(?P<layers>\d+)$")
SPEC_FORM = "'task:level[+task:level...]@<hidden>x<layers>', e.g. 'arithmetic:3@128x3'"


@dataclass(frozen=True)
class Candidate:
    tasks: tuple[str, ...]
    difficulties: tuple[int, ...]  # one level per task
    model: TinyModelShape

    @property
    def key(self) -> str:
        """Folder name: 'arithmetic3-h128x3', tasks joined by '+'."""
        names = "+".join(f"{t}{d}" for t, d in zip(self.tasks, self.difficulties))
        return f"{names}-h{self.model.hidden}x{self.model.layers}"

    @property
    def spec(self) -> str:
        names = "+".join(f"{t}:{d}" for t, d in zip(self.tasks, self.difficulties))
        return f"{names}@{self.model.hidden}x{self.model.layers}"

    @property
    def model_params(self) -> int:
        """Parameters of its model with the laptop tokenizer's vocabulary."""
        from brorl_lib.models.char_tokenizer import build_tokenizer

        return qwen2.parameter_count(self.model.config(build_tokenizer()).to_dict())


def shape(hidden: int, layers: int) -> TinyModelShape:
    return TinyModelShape(hidden=hidden, layers=layers, heads=HEADS, kv_heads=KV_HEADS, intermediate=2 * hidden)


def parse(spec: str, name: str = "candidates item") -> Candidate:
    """A candidate from its spec; a malformed spec, an unknown task, a level it lacks or a bad size is a
    ValueError naming ``name``."""
    m = _SPEC.match(spec.strip()) if isinstance(spec, str) else None
    if not m:
        raise ValueError(f"{name}={spec!r} is not allowed: write {SPEC_FORM}")
    pairs = [p.split(":") for p in m["tasks"].split("+")]
    names = tuple(t for t, _ in pairs)
    levels = tuple(int(d) for _, d in pairs)
    if len(set(names)) != len(names):
        raise ValueError(f"{name}={spec!r} names a task twice")
    for t, level in zip(names, levels):
        check_choice(f"{name} task", t, tasks.FAMILIES)
        check_choice(f"{name} level of {t}", level, tasks.FAMILIES[t].levels)
    hidden, layers = int(m["hidden"]), int(m["layers"])
    check_int(f"{name} hidden size", hidden, low=HEADS, high=1024)
    if hidden % HEADS:
        raise ValueError(f"{name}={spec!r}: the hidden size must be a multiple of {HEADS} (attention heads)")
    check_int(f"{name} layers", layers, low=1, high=32)
    return Candidate(names, levels, shape(hidden, layers))
