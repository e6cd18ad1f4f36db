"""A notebook's parameters, declared once.

Each notebook's parameters are the fields of one frozen dataclass (a ``NotebookConfig``), each declared
with ``param``: default, one doc line, unit and what is allowed (range, choices, distinct items, ...).
From that declaration come the notebook's parameters cell (``parameters_cell``; a test keeps the two
equal), the checks of every profile and ``-p`` override (``Param.parse``, ``Param.coerce``), the help of
``python -m brorl_lib params`` and ``papermill --help-notebook``, and the range checks that run before
any work. pydantic checks each value (strict types, bounds, multiples, choices, patterns: ``Param._item_adapter``);
a refusal raises a ``ValueError`` that names the parameter as the user wrote it, the value and what is allowed;
cross-parameter checks live in the class's ``check_together``.
"""

from __future__ import annotations

import ast
import difflib
import json
import math
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from functools import cache, cached_property
from numbers import Integral, Real
from typing import Annotated, Any, Literal

import yaml
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from brorl_lib.core.validation import check_type

INJECTED_CELL_COMMENT = "# Parameters"  # how papermill's injected cell opens (papermill.parameterize)
PARAM_KEY = "brorl_param"  # dataclass field metadata key holding the declaration
SCALAR_KINDS = ("int", "float", "bool", "str")
KINDS = (*SCALAR_KINDS, "list[int]", "list[float]", "list[str]")

# Bounds shared by every notebook (our choices, generous for every shipped profile).
SEED_MAX = 2**31 - 1  # the largest seed every random-number library here takes as a plain integer
MAX_SEEDS = 100  # seeds per list: a hundred full repeats is far beyond any figure's needs
MAX_LIST_ITEMS = 100  # items per list of sizes (N grids, vocabulary sizes)
# A learning rate: below 1e-12 no float32 weight would move; above 1 no optimiser here is stable.
LEARNING_RATE = {"low": 1e-12, "high": 1.0}
# A sampling temperature: outside [0.01, 100] the softmax is a hard max or uniform to float32 precision.
TEMPERATURE = {"low": 0.01, "high": 100.0}


@dataclass(frozen=True)
class Param:
    """One parameter: what it is, its default, and what is allowed."""

    name: str
    kind: str  # one of KINDS: int, float, bool, str, list[int], list[float], list[str]
    default: Any
    doc: str  # one line: what it means (papermill's help; no '=' and no newline)
    unit: str = ""  # e.g. "tokens", "TB/s"; empty when the value has none
    low: Real | None = None  # smallest allowed value (of each item, for lists)
    high: Real | None = None  # largest allowed value (of each item, for lists)
    low_open: bool = False  # low itself is not allowed (value > low)
    multiple_of: int | None = None  # integers: must be a multiple of this
    choices: tuple = ()  # the allowed values (of each item, for lists)
    pattern: str = ""  # strings: a regular expression the whole value must match
    pattern_doc: str = ""  # what ``pattern`` allows, in words (a whole phrase: "a name of letters, ...")
    nonempty: bool = False  # strings: not empty or blank
    item_doc: str = ""  # strings: what is allowed, in words, when a check elsewhere knows it (e.g. task names)
    distinct: bool = False  # lists: no value twice
    min_items: int = 1  # lists: fewest items
    max_items: int | None = None  # lists: most items
    operational: bool = False  # where or whether to run (a path, a name, a launch switch), not what is computed:
    # a changed value does not make the run a variant (core.variants)

    # --- what is allowed ---
    @property
    def is_list(self) -> bool:
        return self.kind.startswith("list[")

    @property
    def item_kind(self) -> str:
        return self.kind[5:-1] if self.is_list else self.kind

    def _bounds_text(self) -> str:
        lo, hi = self.low, self.high
        if self.item_kind == "int":
            if lo is not None and hi is not None:
                return f"from {_number(lo)} to {_number(hi)}"
        elif lo is not None and hi is not None:
            return f"in {'(' if self.low_open else '['}{_number(lo)}, {_number(hi)}]"
        if lo is not None:
            return f"{'>' if self.low_open else '≥'} {_number(lo)}"
        if hi is not None:
            return f"≤ {_number(hi)}"
        return ""

    def _item_text(self, plural: bool) -> str:
        """What one value (or every list item, ``plural``) may be."""
        kind = self.item_kind
        if self.choices:
            return ("strings, each " if plural else "") + "one of " + ", ".join(_literal(c) for c in self.choices)
        if kind == "bool":
            return "True or False"
        if kind == "str":
            if self.item_doc or self.pattern_doc:
                return self.item_doc or self.pattern_doc
            if self.nonempty:
                return "non-empty strings" if plural else "a non-empty string"
            return "strings" if plural else "a string (may be empty)"
        noun = {"int": ("an integer", "integers"), "float": ("a finite number", "finite numbers")}[kind][plural]
        if self.multiple_of:
            noun = f"{'multiples' if plural else 'a multiple'} of {self.multiple_of}"
        bounds = self._bounds_text()
        return f"{noun} {bounds}" if bounds else noun

    def allowed(self) -> str:
        """What is allowed, in words (the cell's comment and every error message end with it)."""
        if not self.is_list:
            return self._item_text(plural=False)
        count = f"{self.min_items} to {self.max_items}" if self.max_items is not None else f"{self.min_items} or more"
        distinct = " distinct" if self.distinct else ""
        return f"a list of {count}{distinct} {self._item_text(plural=True)}"

    # --- checks ---
    def check(self, value) -> None:
        """Raise ValueError naming this parameter when ``value`` is not allowed."""
        if not self.is_list:
            self._check_item(self.name, value)
            return
        example = _literal(self.default or self._example_list())
        what = f"{self.allowed()}, e.g. {example}"
        if isinstance(value, str):  # plain papermill's -p passes a list as its text
            raise ValueError(
                f"{self.name}={value!r} is not allowed: expected {what}, got a string (plain papermill's -p passes "
                f"a list as text: give it with papermill's -y option, -y '{self.name}: {example}', or through the "
                f"pipeline, python -m brorl_lib run NOTEBOOK -p {self.name} '{example}')"
            )
        check_type(self.name, value, (list, tuple), what)
        if len(value) < self.min_items or (self.max_items is not None and len(value) > self.max_items):
            raise ValueError(f"{self.name}={_short(value)} is not allowed ({len(value)} items): expected {what}")
        for item in value:
            self._check_item(f"{self.name} item", item)
        if self.distinct:
            seen = set()
            for item in value:
                if item in seen:
                    raise ValueError(
                        f"{self.name}={_short(value)} is not allowed: {item!r} is listed twice; "
                        f"expected {self.allowed()}"
                    )
                seen.add(item)

    def _check_item(self, name: str, value) -> None:
        """One value (or list item) against the declaration, checked by pydantic in strict mode (no bool for a
        number, no text for a number, no NaN); the message is ours: the name, the value and what is allowed."""
        if self.item_kind != "bool" and isinstance(value, bool):  # pydantic takes True for a Literal 1
            raise ValueError(f"{name}={value!r} is not allowed: expected {self._item_text(plural=False)}")
        try:
            self._item_adapter.validate_python(value, strict=True)
        except ValidationError:
            raise ValueError(f"{name}={value!r} is not allowed: expected {self._item_text(plural=False)}") from None

    @cached_property
    def _item_adapter(self) -> TypeAdapter:
        """pydantic's validator of one item as declared: its type, then its bounds, multiple, choices or pattern."""
        if self.choices:
            return TypeAdapter(Literal[self.choices])
        kind = self.item_kind
        if kind == "bool":
            return TypeAdapter(bool)
        if kind == "str":
            full = rf"\A(?:{self.pattern})\Z" if self.pattern else ""
            full = (r"(?=\s*\S)" if self.nonempty else "") + full
            return TypeAdapter(Annotated[str, Field(pattern=full or None)], config=ConfigDict(regex_engine="python-re"))
        bound = {"gt" if self.low_open else "ge": self.low, "le": self.high}
        number = Field(multiple_of=self.multiple_of, allow_inf_nan=False, **bound)
        return TypeAdapter(Annotated[int if kind == "int" else float, number])

    # --- reading values from YAML and the command line ---
    def coerce(self, value):
        """A value read from YAML as this parameter's kind: a number in any YAML or Python spelling
        (``1e-3``, ``1_000``, ``3e2`` for an integer) becomes that number; anything else is left for ``check``."""
        if self.is_list:
            return [_coerce_scalar(self.item_kind, v) for v in value] if isinstance(value, (list, tuple)) else value
        return _coerce_scalar(self.kind, value)

    def parse(self, text: str):
        """``-p NAME TEXT``: the text read as YAML, then coerced. A string parameter takes the text as it
        is unless it is a quoted YAML string, and refuses a YAML list or mapping (``[x]``: one string is
        expected). Malformed YAML raises a ValueError naming the parameter."""
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as err:
            if self.kind == "str":
                return text
            problem = getattr(err, "problem", None) or str(err).splitlines()[0]
            raise ValueError(
                f"{self.name}: cannot read {text!r} as a value ({problem}); "
                f"expected {self.allowed()}, e.g. {_literal(self.default)}"
            ) from None
        if self.kind == "str":
            if isinstance(value, (list, dict)):  # "[x]" is a list given where one string is expected
                what = "a list" if isinstance(value, list) else "a mapping"
                raise ValueError(
                    f"{self.name}={text!r} is not allowed: it reads as {what}, where one string is expected: "
                    f"{self.allowed()}"
                )
            return value if isinstance(value, str) else text  # 123, true, null: the text as typed
        return self.coerce(value)

    # --- rendering ---
    def cell_line(self, value: Any = MISSING) -> str:
        """This parameter's line of the parameters cell: ``name: type = default  # doc, unit; allowed``, with
        ``value`` in place of the default where given."""
        unit = f", in {self.unit}" if self.unit else ""
        shown = self.default if value is MISSING else value
        return f"{self.name}: {self.kind} = {_literal(shown)}  # {self.doc}{unit}; {self.allowed()}"

    def _example_list(self) -> list:
        if self.choices:
            return list(self.choices[:2])
        return [self.low if self.low is not None else 0]

    def validate_declaration(self) -> None:
        """A declaration papermill can read and whose default passes its own checks."""
        if self.kind not in KINDS:
            raise TypeError(f"{self.name}: kind {self.kind!r} is not one of {KINDS}")
        text = self.cell_line()
        if "\n" in text or text.count("=") != 1:
            raise TypeError(f"{self.name}: doc, unit and allowed text must hold no '=' or newline: {text!r}")
        self.check(self.default)


def param(default, doc: str, **spec) -> Any:
    """Declare a NotebookConfig field: ``seed: int = param(0, "RNG seed", low=0, high=SEED_MAX)``.

    ``spec`` takes the fields of ``Param`` after ``doc`` (unit, low, high, choices, distinct, ...)."""
    info = {"default": default, "doc": doc, **spec}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={PARAM_KEY: info})
    return field(default=default, metadata={PARAM_KEY: info})


def declared_as(cls: type, name: str) -> Any:
    """A field declared exactly as ``cls``' field ``name``: a notebook's parameter that is a field of a settings
    object the library takes (``cls``, itself a ``NotebookConfig``) keeps that one declaration."""
    info = next((f.metadata[PARAM_KEY] for f in fields(cls) if f.name == name and PARAM_KEY in f.metadata), None)
    if info is None:
        raise TypeError(f"{cls.__name__} declares no parameter {name!r}")
    return param(**info)


@cache
def _declaration(cls: type) -> tuple[Param, ...]:
    out = []
    for f in fields(cls):
        info = f.metadata.get(PARAM_KEY)
        if info is None:
            continue
        kind = f.type if isinstance(f.type, str) else (f.type.__name__ if isinstance(f.type, type) else str(f.type))
        p = Param(name=f.name, kind=kind.replace(" ", ""), **info)
        p.validate_declaration()
        out.append(p)
    return tuple(out)


@dataclass(frozen=True)
class NotebookConfig:
    """Base of a notebook's parameters: the declared checks run on construction, then ``check_together``."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Every declared check (in declaration order), then the cross-parameter checks."""
        for p in self.declaration():
            p.check(getattr(self, p.name))
        self.check_together()

    def check_together(self) -> None:
        """Checks that involve several parameters; subclasses override. Runs after every single check."""

    @classmethod
    def declaration(cls) -> tuple[Param, ...]:
        """The declared parameters, in the order of the fields (and of the parameters cell)."""
        return _declaration(cls)

    @classmethod
    def parameter(cls, name: str) -> Param:
        for p in cls.declaration():
            if p.name == name:
                return p
        raise ValueError(f"no parameter {name!r}; the parameters are: {', '.join(cls.parameter_names())}")

    @classmethod
    def parameter_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def defaults(cls) -> dict[str, object]:
        """Every declared default (the notebook's own values: the quick profile)."""
        return {
            f.name: (f.default_factory() if f.default is MISSING else f.default)
            for f in fields(cls)
            if f.default is not MISSING or f.default_factory is not MISSING
        }

    @classmethod
    def parameters_cell(cls, values: Mapping[str, object] | None = None) -> str:
        """The source of the notebook's cell tagged ``parameters``, one line per parameter; ``values`` (checked)
        in place of the defaults they name."""
        values = dict(values or {})
        unknown = sorted(set(values) - set(cls.parameter_names()))
        if unknown:
            raise ValueError(f"{cls.__name__} has no parameters {unknown}")
        for name, value in values.items():
            cls.parameter(name).check(value)
        return "\n".join(p.cell_line(values.get(p.name, MISSING)) for p in cls.declaration())

    @classmethod
    def from_namespace(cls, namespace: Mapping[str, object]):
        """Build from a mapping that holds every field, e.g. a notebook's ``globals()``, and register it as the
        parameters of the run in this process (``core.variants``: what its artifacts' class is compared with)."""
        cls.check_injected_names(namespace)
        missing = [n for n in cls.parameter_names() if n not in namespace]
        if missing:
            raise ValueError(f"{cls.__name__}: missing parameters {missing}")
        config = cls(**{n: namespace[n] for n in cls.parameter_names()})
        from brorl_lib.core import variants

        variants.register_run(config)  # the run's parameters: a changed one makes its artifacts a variant
        return config

    @classmethod
    def check_injected_names(cls, namespace: Mapping[str, object]) -> None:
        """Refuse a name papermill injected (``-p NAME VALUE``; its cell opens with ``# Parameters``) that is no
        parameter: papermill itself only warns and the notebook would run its defaults."""
        injected = [src for src in namespace.get("In", ()) if src.startswith(INJECTED_CELL_COMMENT)]
        if not injected:
            return
        names = cls.parameter_names()
        for node in ast.walk(ast.parse(injected[-1])):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in names:
                close = difflib.get_close_matches(node.id, names, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ValueError(f"unknown parameter {node.id!r}: {hint}the parameters are: {', '.join(names)}")

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def build(self, cls: type[NotebookConfig], **given):
        """``cls`` (a settings object the library takes, whose fields this config declares as its own:
        ``declared_as``) from this config's values of the fields the two share by name, then ``given``."""
        mine = set(self.parameter_names())
        return cls(**{**{n: getattr(self, n) for n in cls.parameter_names() if n in mine}, **given})


# --- helpers ---
def _coerce_scalar(kind: str, value):
    if isinstance(value, bool) or kind in ("bool", "str"):
        return value
    if kind == "int":
        if isinstance(value, str):
            text = value.strip()
            try:
                return int(text)
            except ValueError:
                try:
                    value = float(text)
                except ValueError:
                    return value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        return value
    if isinstance(value, str):  # float: "1e-3", "1_000.5", "nan" (refused later by name)
        try:
            return float(value.strip())
        except ValueError:
            return value
    return value


def _number(x: Real) -> str:
    """A bound as a reader writes it: 1,000,000 for big integers, 1e-3 for small numbers."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e6:
        x = int(x)
    if isinstance(x, Integral):
        return f"{x:,}" if abs(x) >= 10_000 else str(x)
    return _float_literal(float(x))


def _float_literal(x: float) -> str:
    """The shortest exact spelling: scientific from 1e-3 down and from 1e6 up (1e-3, 3e-4), else repr (0.005)."""
    if x != 0 and math.isfinite(x) and (abs(x) <= 1e-3 or abs(x) >= 1e6):
        for digits in range(17):
            mantissa, exponent = f"{x:.{digits}e}".split("e")
            text = f"{mantissa}e{int(exponent)}"
            if float(text) == x:
                return text
    return repr(x)


def _literal(value) -> str:
    """A Python literal of ``value`` as the parameters cell writes it."""
    if isinstance(value, bool) or isinstance(value, Integral):
        return repr(value)
    if isinstance(value, float):
        return _float_literal(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return repr(value)


def _short(value, limit: int = 120) -> str:
    text = _literal(list(value)) if isinstance(value, (list, tuple)) else repr(value)
    return text if len(text) <= limit else text[: limit - 5] + " ...]"
