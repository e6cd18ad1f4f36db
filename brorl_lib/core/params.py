"""Base class for a notebook's validated parameters.

Each notebook's parameters cell is mirrored by a frozen dataclass whose ``validate`` raises a
``ValueError`` naming the parameter, the value and what is allowed. The pipeline builds it before
running anything; the notebook builds it from its own namespace right after the parameters cell.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class NotebookConfig:
    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError on a bad value; subclasses override."""

    @classmethod
    def parameter_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_namespace(cls, namespace: Mapping[str, object]):
        """Build from a mapping that holds every field, e.g. a notebook's ``globals()``."""
        missing = [n for n in cls.parameter_names() if n not in namespace]
        if missing:
            raise ValueError(f"{cls.__name__}: missing parameters {missing}")
        return cls(**{n: namespace[n] for n in cls.parameter_names()})

    def as_dict(self) -> dict[str, object]:
        return asdict(self)
