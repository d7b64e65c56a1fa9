"""Value objects without :mod:`dataclasses`: what every verb's start-up can afford.

``import dataclasses`` imports :mod:`inspect` (and with it ``ast``, ``dis``, ``tokenize``), which costs
a staticpodctl verb about as much as the whole interpreter's start-up, and each ``@dataclass``
then compiles its methods at import. A record instead annotates its fields in the class body (in
order, as a dataclass does) and writes an ordinary typed ``__init__`` that assigns each one;
:class:`Record` derives ``==``, ``repr`` and :meth:`Record.replace` from those annotations.
:class:`FrozenRecord` adds a hash: its fields are ``Final`` for mypy (never assigned after
``__init__``), which is what ``@dataclass(frozen=True)`` promised at run time.

``_not_compared``: names of fields left out of ``==`` and the hash (a dataclass's
``field(compare=False)``).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any, TypeVar

    _R = TypeVar("_R", bound="Record")


class Record:
    """Base of a mutable record: ``==`` and ``repr`` over the annotated fields, no hash (as a
    ``@dataclass`` without ``frozen=True``)."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _compared: tuple[str, ...] = ()
    _not_compared: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names: list[str] = []
        for klass in reversed(cls.__mro__):
            for name in klass.__dict__.get("__annotations__", {}):
                if not name.startswith("_") and name not in names:
                    names.append(name)
        cls._fields = tuple(names)
        cls._compared = tuple(n for n in names if n not in cls._not_compared)

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in self._compared)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable: unhashable, as a non-frozen dataclass

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._fields)
        return f"{type(self).__qualname__}({inner})"

    def replace(self: _R, **changes: Any) -> _R:
        """A new record of the same class with ``changes`` (field name -> value) applied, built
        through ``__init__`` as :func:`dataclasses.replace` does. Raises TypeError for a name that
        is not a field."""
        unknown = sorted(set(changes) - set(self._fields))
        if unknown:
            raise TypeError(f"{type(self).__qualname__} has no field {', '.join(unknown)}")
        values = {n: getattr(self, n) for n in self._fields}
        values.update(changes)
        return type(self)(**values)

    def field_values(self) -> dict[str, Any]:
        """Field name -> value, in field order (a shallow :func:`dataclasses.asdict`)."""
        return {n: getattr(self, n) for n in self._fields}


class FrozenRecord(Record):
    """Base of an immutable record (``@dataclass(frozen=True)``): hashable over its compared
    fields; subclasses annotate their fields ``Final`` so that mypy refuses any later assignment."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._key())
