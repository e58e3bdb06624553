"""`datarecord`: the project's dataclass decorator, cheaper to apply at import.

A storpath record is a standard dataclass (`dataclasses.fields`, `replace`, `asdict` and
`is_dataclass` work on it) whose `__repr__`, `__eq__` and `__hash__` are written once here,
for every record, instead of generated per class. Python 3.11's dataclasses compile each
generated method with its own `exec`: frozen records cost six, and `storpath serve` imports
about 85 records before its first scrape, so a third of the decorator's time went to methods
that say the same thing in every class. A frozen record's `__setattr__` and `__delattr__`
are closures made here (`_frozen_methods`) instead of compiled per class (another third).
Only `__init__`, which differs by signature and runs on every scrape, is still generated.

The methods behave as the generated ones do:
- `__eq__`: the same class, and the tuples of the compared fields (`field(compare=False)`
  left out) equal, as tuples compare (an element is equal to itself, NaN included);
  NotImplemented against another class.
- `__hash__` (frozen, compared): the hash of that tuple; a record compared and not frozen is
  unhashable; one declared `eq=False` keeps the identity's hash and equality.
- `__repr__`: `Name(a=1, b='x')` with the fields shown (`field(repr=False)` left out), guarded
  against recursion.
A method the class writes itself is kept, as dataclasses keep it.
"""

from __future__ import annotations

import dataclasses
import reprlib
from operator import attrgetter
from typing import Any, Callable, Optional, Tuple, TypeVar, overload

T = TypeVar("T", bound=type)


def _values(names: Tuple[str, ...]) -> Callable[[Any], tuple]:
    """A function giving the tuple of `names`' values of a record (attrgetter's C loop)."""
    if len(names) > 1:
        return attrgetter(*names)
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        compared = self.__record_compared__
        return compared(self) == compared(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(self.__record_hashed__(self))


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__record_shown__)
    return f"{self.__class__.__qualname__}({shown})"


def _frozen_methods(cls: type, fields: list, globals: dict) -> tuple:
    """A frozen record's `__setattr__` and `__delattr__`, as dataclasses' generated ones
    behave (the fields, and any name on the record's own class, cannot be set or deleted;
    a subclass that is not a dataclass may set its other names), made as closures instead
    of compiled from source for each class."""
    names = frozenset(f.name for f in fields)
    refuse = dataclasses.FrozenInstanceError

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise refuse(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise refuse(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __setattr__, __delattr__


# Python 3.11's and 3.12's dataclasses compile a frozen class's `__setattr__` and `__delattr__`
# with an `exec` each (a third of what the decorator costs at start-up), through
# `_frozen_get_del_attr(cls, fields, globals)`; while a record is made, that function is
# `_frozen_methods`. Python 3.13 compiles all of a class's methods in one `exec` and passes
# other arguments there: where the function is not the one expected, it is left alone.
# (Two threads making records at once may each put back the function the other swapped in:
# what either gets is the same, and the last one leaves the standard function in place.)
_GENERATED = getattr(dataclasses, "_frozen_get_del_attr", None)
_OURS = getattr(getattr(_GENERATED, "__code__", None), "co_varnames", ())[:3] == ("cls", "fields", "globals")


def _dataclass(cls: T, frozen: bool, slots: bool) -> T:
    if not (frozen and _OURS):
        return dataclasses.dataclass(cls, repr=False, eq=False, frozen=frozen, slots=slots)
    dataclasses._frozen_get_del_attr = _frozen_methods  # type: ignore[attr-defined]
    try:
        return dataclasses.dataclass(cls, repr=False, eq=False, frozen=True, slots=slots)
    finally:
        dataclasses._frozen_get_del_attr = _GENERATED  # type: ignore[attr-defined]


def _make(cls: T, frozen: bool, eq: bool, slots: bool) -> T:
    own = cls.__dict__
    made = _dataclass(cls, frozen, slots)
    fields = dataclasses.fields(made)
    made.__record_shown__ = tuple(f.name for f in fields if f.repr)
    if "__repr__" not in own:
        made.__repr__ = _repr
    if not eq:
        return made
    compared = tuple(f.name for f in fields if f.compare)
    made.__record_compared__ = staticmethod(_values(compared))
    if "__eq__" not in own:
        made.__eq__ = _eq
    # A class body that sets __eq__ alone has __hash__ None in its dict: no hash of its own.
    own_hash = own.get("__hash__", dataclasses.MISSING)
    if own_hash is dataclasses.MISSING or (own_hash is None and "__eq__" in own):
        if frozen:
            hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
            made.__record_hashed__ = staticmethod(_values(hashed))
            made.__hash__ = _hash
        else:
            made.__hash__ = None  # type: ignore[assignment]
    return made


@overload
def datarecord(cls: T) -> T: ...


@overload
def datarecord(*, frozen: bool = False, eq: bool = True, slots: bool = False) -> Callable[[T], T]: ...


def datarecord(cls: Optional[T] = None, *, frozen: bool = False, eq: bool = True, slots: bool = False) -> Any:
    """`@datarecord` or `@datarecord(frozen=True)`: a dataclass with the methods written here."""
    if cls is not None:
        return _make(cls, frozen, eq, slots)
    return lambda target: _make(target, frozen, eq, slots)
