"""Typed per-algorithm options: one small dataclass per algorithm declares its knobs once.

The same declaration checks ``--opt key=value`` and a library ``SynthOptions.extra`` (types, choices,
ranges, unknown keys), gives the synthesizer typed fields to read, lists the options in ``ccviz list``
and draws the app's widgets. A field is declared with ``option(default, meaning, ...)``; its type
comes from the annotation (``bool``, ``int``, ``float`` or ``str``; ``X | None`` when ``None`` means
"the algorithm decides").
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from ccviz.errors import CcvizError

KINDS: dict[type, str] = {bool: "bool", int: "int", float: "float", str: "str"}
TRUE_WORDS, FALSE_WORDS = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def option(default: Any, meaning: str, *, choices: tuple[str, ...] = (), minimum: float | None = None,
           maximum: float | None = None) -> Any:
    """A dataclass field that is an algorithm option (``meaning`` is the one line users read)."""
    return field(default=default, metadata={"meaning": meaning, "choices": tuple(choices), "minimum": minimum,
                                            "maximum": maximum})


@dataclass(frozen=True)
class OptionSpec:
    """One option as users see it: ``ccviz list``, the app's widget and the error messages read it."""

    name: str
    kind: type  # bool, int, float or str
    default: Any
    meaning: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    automatic: bool = False  # None is allowed and means "the algorithm decides"

    def allowed(self) -> str:
        """The accepted values in words."""
        if self.choices:
            words = "one of " + ", ".join(self.choices)
        elif self.kind is bool:
            words = "true or false"
        else:
            noun = "a whole number" if self.kind is int else "a number"
            low = f">= {self.minimum:g}" if self.minimum is not None else ""
            high = f"<= {self.maximum:g}" if self.maximum is not None else ""
            words = " ".join(filter(None, (noun, low, "and" if low and high else "", high)))
        return words + (" (or auto to let the algorithm choose)" if self.automatic else "")

    def refuse(self, value: Any) -> CcvizError:
        return CcvizError(f"{self.name}: {value!r} is not {self.allowed()}; {self.meaning}", self.name)

    def convert(self, value: Any) -> Any:
        """``value`` (from JSON, YAML, a text field or Python) as this option's type, or a CcvizError."""
        word = value.strip().lower() if isinstance(value, str) else None
        if value is None or (word in ("auto", "automatic", "null") and word not in self.choices):
            if self.automatic:
                return None
            raise self.refuse(value)
        if self.kind is bool:
            return self._boolean(value)
        if self.kind is str:
            text = str(value).strip()
            if self.choices:
                text = text.lower()
                if text not in self.choices:
                    raise self.refuse(value)
            return text
        return self._number(value)

    def _boolean(self, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in TRUE_WORDS + FALSE_WORDS:
            return value.strip().lower() in TRUE_WORDS
        raise self.refuse(value)

    def _number(self, value: Any) -> int | float:
        if isinstance(value, bool):
            raise self.refuse(value)
        try:
            number = float(value) if isinstance(value, str) else value
            if self.kind is int:
                if not float(number).is_integer():
                    raise ValueError
                number = int(number)
            else:
                number = float(number)
        except (TypeError, ValueError, OverflowError):
            raise self.refuse(value) from None
        if (self.minimum is not None and number < self.minimum) or (self.maximum is not None and number > self.maximum) \
                or number != number:
            raise self.refuse(value)
        return number

    def as_dict(self) -> dict[str, Any]:
        """The option for ``ccviz list --json``."""
        return {"name": self.name, "type": KINDS[self.kind], "default": self.default, "choices": list(self.choices),
                "minimum": self.minimum, "maximum": self.maximum, "automatic": self.automatic,
                "meaning": self.meaning}


T = TypeVar("T", bound="AlgorithmOptions")


@dataclass(frozen=True)
class AlgorithmOptions:
    """Base of an algorithm's options dataclass (an algorithm without options uses it as it is)."""

    @classmethod
    def specs(cls) -> tuple[OptionSpec, ...]:
        return _specs(cls)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(spec.name for spec in cls.specs())

    @classmethod
    def checked(cls, extra: Mapping[str, Any], algorithm: str) -> dict[str, Any]:
        """``extra`` with every value converted to its option's type; a CcvizError names a bad key."""
        specs = {spec.name: spec for spec in cls.specs()}
        for key in extra:
            if key not in specs:
                takes = f"it takes {', '.join(specs)}" if specs else "it takes none"
                raise CcvizError(f"opt: {algorithm} has no option {key!r}; {takes} (see `ccviz list`)", "opt")
        return {key: specs[key].convert(value) for key, value in extra.items()}

    @classmethod
    def parse(cls: type[T], extra: Mapping[str, Any], algorithm: str = "") -> T:
        """The typed options from an ``extra`` dict (absent keys take their defaults)."""
        return cls(**cls.checked(extra, algorithm or cls.__name__))


@functools.cache
def _specs(cls: type[AlgorithmOptions]) -> tuple[OptionSpec, ...]:
    """The fields of an options dataclass as ``OptionSpec``s (types read from the annotations once)."""
    hints = typing.get_type_hints(cls)
    specs = []
    for f in fields(cls):
        kind, automatic = _kind(hints[f.name])
        meta = f.metadata
        specs.append(OptionSpec(f.name, kind, f.default, meta.get("meaning", ""), meta.get("choices", ()),
                                meta.get("minimum"), meta.get("maximum"), automatic))
    return tuple(specs)


def _kind(hint: Any) -> tuple[type, bool]:
    """(bool | int | float | str, whether None is allowed) from an annotation such as ``int | None``."""
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union \
        else (hint,)
    kinds = [a for a in args if a is not type(None)]
    if len(kinds) != 1 or kinds[0] not in KINDS:
        raise TypeError(f"an option must be bool, int, float or str (optionally | None), got {hint!r}")
    return kinds[0], len(kinds) < len(args)
