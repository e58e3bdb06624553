"""storpath.base.records.datarecord behaves as dataclasses.dataclass does (its methods are
written once instead of generated per class), and every record of the exporter is made by it."""

from __future__ import annotations

import dataclasses
import importlib
import math
import pkgutil
import sys
from typing import Optional, Tuple

import pytest

import storpath
from storpath.base.records import datarecord

NAN = float("nan")


def _pair(**options):
    """The same class made by dataclasses.dataclass and by datarecord."""
    made = []
    for decorate in (dataclasses.dataclass(**options), datarecord(**options)):
        @decorate
        class Link:
            address: str
            speed: Optional[float] = None
            lanes: Tuple[int, ...] = ()
            seen: int = dataclasses.field(default=0, compare=False)
            raw: bytes = dataclasses.field(default=b"", repr=False)
        made.append(Link)
    return made


VALUES = [("0000:01:00.0",), ("0000:01:00.0", 16.0, (1, 2), 3, b"x"), ("a", NAN), ("a", math.inf, (), 1),
          ("'quoted\"", -0.0, (NAN,))]


@pytest.mark.parametrize("frozen", [False, True])
def test_equality_hash_and_repr_are_the_dataclass_ones(frozen):
    standard, ours = _pair(frozen=frozen)
    for one in VALUES:
        for other in VALUES:
            for extra in ({}, {"seen": 9} if len(other) < 4 else {}):
                a, b = standard(*one), standard(*other, **extra)
                x, y = ours(*one), ours(*other, **extra)
                assert (a == b) == (x == y) and (a != b) == (x != y), (one, other, extra)
                assert (a == a) == (x == x)  # the same NaN object is equal to itself, in a tuple
                if frozen:
                    assert (hash(a) == hash(b)) == (hash(x) == hash(y))
                    assert hash(a) == hash(x)
        assert repr(standard(*one)) == repr(ours(*one)).replace(ours.__qualname__, standard.__qualname__)
        assert (ours(*one) == one) is False and ours(*one).__eq__(one) is NotImplemented
    if frozen:
        with pytest.raises(dataclasses.FrozenInstanceError):
            ours("a").speed = 1.0
    else:
        with pytest.raises(TypeError, match="unhashable"):
            hash(ours("a"))
        changed = ours("a")
        changed.speed = 2.0
        assert changed == ours("a", 2.0)


def test_it_stays_a_dataclass():
    _, ours = _pair(frozen=True)
    link = ours("0000:01:00.0", 8.0)
    assert dataclasses.is_dataclass(link) and [f.name for f in dataclasses.fields(link)][:2] == ["address", "speed"]
    assert dataclasses.replace(link, speed=16.0) == ours("0000:01:00.0", 16.0)
    assert dataclasses.asdict(link)["speed"] == 8.0 and ours.__match_args__[0] == "address"


def test_eq_false_keeps_identity_and_a_class_keeps_its_own_methods():
    @datarecord(frozen=True, eq=False)
    class Family:
        name: str

    one = Family("a")
    assert one != Family("a") and one == one and hash(one) == object.__hash__(one)

    @datarecord(frozen=True)
    class Named:
        name: str

        def __repr__(self) -> str:
            return f"<{self.name}>"

        def __eq__(self, other):
            return isinstance(other, Named) and self.name.lower() == other.name.lower()

    assert repr(Named("A")) == "<A>" and Named("A") == Named("a")
    # As with dataclasses: an __eq__ of its own and no __hash__ leaves a frozen record hashed by fields.
    assert hash(Named("A")) == hash(("A",))


def test_subclass_and_recursion():
    @datarecord
    class Node:
        name: str
        children: list = dataclasses.field(default_factory=list)

    @datarecord
    class Leaf(Node):
        size: int = 0

    root = Node("root")
    root.children.append(root)
    assert repr(root) == f"{Node.__qualname__}(name='root', children=[...])"
    assert Leaf("x", [], 3) == Leaf("x", [], 3) and Leaf("x") != Node("x")
    assert repr(Leaf("x")) == f"{Leaf.__qualname__}(name='x', children=[], size=0)"


def _outcome(action):
    try:
        action()
    except Exception as exc:  # the same kind of exception with the same message
        return type(exc), str(exc)
    return None


@pytest.mark.parametrize("slots", [False, True])
def test_a_frozen_record_refuses_what_a_frozen_dataclass_refuses(slots):
    """Setting or deleting a field, or any name on the record's own class, raises
    FrozenInstanceError with dataclasses' message; a plain subclass (not a dataclass) may set
    and delete names of its own, as with dataclasses. The two methods are not compiled per
    class on the Pythons whose dataclasses would (3.11, 3.12)."""
    from storpath.base import records

    standard, ours = _pair(frozen=True, slots=slots)
    for cls in (standard, ours):
        cls.Plain = type("Plain", (cls,), {})
    for name in ("speed", "address", "other"):
        for make in (lambda cls: cls("a"), lambda cls: cls.Plain("a")):
            a, x = make(standard), make(ours)
            assert _outcome(lambda: setattr(a, name, 1)) == _outcome(lambda: setattr(x, name, 1)), name
            assert _outcome(lambda: delattr(a, name)) == _outcome(lambda: delattr(x, name)), name
            assert vars(a) == vars(x) if not slots else True
    assert ours.__setattr__.__qualname__ == f"{ours.__qualname__}.__setattr__"
    assert ours.__delattr__.__qualname__ == f"{ours.__qualname__}.__delattr__"
    assert ours.__dataclass_params__.frozen and dataclasses.replace(ours("a"), speed=2.0).speed == 2.0
    if sys.version_info < (3, 13):
        assert records._OURS and ours.__setattr__.__code__ is records._frozen_methods(ours, [], {})[0].__code__
    assert dataclasses._frozen_get_del_attr is records._GENERATED  # put back after each record


def test_slots():
    @datarecord(slots=True)
    class Slotted:
        a: int

    assert Slotted(1) == Slotted(1) and not hasattr(Slotted(1), "__dict__") and repr(Slotted(2)) == f"{Slotted.__qualname__}(a=2)"


def test_every_record_of_the_exporter_is_a_documented_datarecord():
    """The methods written once only help if every record takes them: a plain @dataclass
    anywhere in the package fails here (found by what is made, not by spelling). Each says
    what it holds in a docstring of its own (one without makes dataclasses write one from
    inspect.signature at import)."""
    for module in pkgutil.walk_packages(storpath.__path__, "storpath."):
        if not module.name.endswith("__main__"):  # (runs the command line)
            importlib.import_module(module.name)
    plain, undocumented = [], []
    for name, module in list(sys.modules.items()):
        if not name.startswith("storpath.") or module is None:
            continue
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == name and dataclasses.is_dataclass(value):
                if "__record_shown__" not in value.__dict__:
                    plain.append(f"{name}.{value.__qualname__}")
                if (value.__dict__.get("__doc__") or "").startswith(value.__name__ + "("):
                    undocumented.append(f"{name}.{value.__qualname__}")
    assert plain == [] and undocumented == []
