"""``nexus._dataclass.dataclass`` behaves as the standard decorator for every option nexus uses.

Each case defines the same class twice, with each decorator, and compares what callers can see.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import re
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from nexus._dataclass import WARM_CALLS, dataclass

Decorator = Callable[..., Any]


def _standard_fields(cls: Any = None, /, **options: Any) -> Any:
    """nexus's decorator as it runs on a Python other than the one its own field-making is checked on."""
    import nexus._dataclass as module

    def make(target: Any) -> Any:
        saved, module.FIELDS_HERE = module.FIELDS_HERE, False
        try:
            return dataclass(**options)(target)
        finally:
            module.FIELDS_HERE = saved

    return make if cls is None else make(cls)


BOTH = pytest.mark.parametrize(
    "deco", [dataclasses.dataclass, dataclass, _standard_fields], ids=["stdlib", "nexus", "nexus-standard-fields"]
)


def _point(deco: Decorator, **options: Any) -> Any:
    @deco(slots=True, **options)
    class Point:
        """A point."""

        x: int
        y: int = 0
        tags: list[str] = dataclasses.field(default_factory=list, compare=False)
        note: str = dataclasses.field(default="", repr=False, compare=False)
        seen: int = dataclasses.field(default=0, init=False)

    return Point


@BOTH
def test_construction_defaults_and_factories(deco: Decorator) -> None:
    point = _point(deco)
    a, b = point(1), point(1, 2, ["t"], note="n")
    assert (a.x, a.y, a.tags, a.note, a.seen) == (1, 0, [], "", 0)
    assert (b.x, b.y, b.tags, b.note) == (1, 2, ["t"], "n")
    assert point(1).tags is not point(1).tags  # a fresh list each time
    with pytest.raises(TypeError, match=r"__init__\(\) missing 1 required positional argument: 'x'"):
        point()
    with pytest.raises(TypeError, match="unexpected keyword argument 'seen'"):
        point(1, seen=3)
    assert point.__match_args__ == ("x", "y", "tags", "note")


def test_the_same_repr_eq_hash_and_introspection() -> None:
    std, ours = _point(dataclasses.dataclass, frozen=True), _point(dataclass, frozen=True)
    for args in [(1,), (1, 2, ["a"])]:
        s, o = std(*args, note="x"), ours(*args, note="x")
        assert repr(s) == repr(o) and "note" not in repr(o)
        assert hash(s) == hash(o)
        assert (s == std(*args, note="other")) is (o == ours(*args, note="other")) is True  # note: compare=False
    assert [f.name for f in dataclasses.fields(ours)] == [f.name for f in dataclasses.fields(std)]
    assert dataclasses.asdict(ours(1, 2)) == dataclasses.asdict(std(1, 2))
    changed = dataclasses.replace(ours(1, 2, note="n"), y=5)
    assert (changed.x, changed.y, changed.note) == (1, 5, "n")
    assert ours(1).__eq__(std(1)) is NotImplemented and ours(1) != std(1)


@BOTH
def test_mutable_classes_are_unhashable_and_frozen_ones_refuse_changes(deco: Decorator) -> None:
    mutable, frozen = _point(deco), _point(deco, frozen=True)
    with pytest.raises(TypeError, match="unhashable"):
        hash(mutable(1))
    item = mutable(1)
    item.y = 3
    assert item.y == 3
    fixed = frozen(1)
    assert hash(fixed) == hash(frozen(1))
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'y'"):
        fixed.y = 2
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'y'"):
        del fixed.y


@BOTH
def test_kw_only_eq_false_and_post_init(deco: Decorator) -> None:
    @deco(slots=True, kw_only=True, eq=False)
    class Options:
        name: str
        size: int = 1
        doubled: int = dataclasses.field(default=0, init=False)

        def __post_init__(self) -> None:
            self.doubled = self.size * 2

    with pytest.raises(TypeError):
        Options("positional")  # type: ignore[misc]
    a = Options(name="a", size=4)
    assert a.doubled == 8 and a != Options(name="a", size=4) and a == a
    assert hash(a) == object.__hash__(a)


@BOTH
def test_a_recursive_repr_stops(deco: Decorator) -> None:
    @deco(slots=True)
    class Node:
        children: list[Any] = dataclasses.field(default_factory=list)

    node = Node()
    node.children.append(node)
    assert repr(node).endswith(".Node(children=[...])")


@dataclass(slots=True, frozen=True)
class Frozen:
    """Module level, so pickle can find it."""

    a: int
    b: tuple[int, ...] = ()


@dataclass(slots=True)
class Mutable:
    """Module level, so pickle can find it."""

    a: int
    b: list[int] = dataclasses.field(default_factory=list)


@pytest.mark.parametrize("value", [Frozen(1, (2,)), Mutable(1, [2])])
def test_copy_and_pickle(value: Any) -> None:
    for twin in (copy.copy(value), copy.deepcopy(value), pickle.loads(pickle.dumps(value))):
        assert twin == value and twin is not value


def test_what_the_standard_decorator_refuses_is_refused() -> None:
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):

        @dataclass(slots=True)
        class Bad:
            a: int = 0
            b: int  # type: ignore[misc]

    with pytest.raises(ValueError, match="mutable default"):

        @dataclass(slots=True)
        class Shared:
            items: list[int] = []

    with pytest.raises(TypeError, match="defines __eq__"):

        @dataclass(slots=True)
        class OwnEq:
            a: int

            def __eq__(self, other: object) -> bool:
                return True

    with pytest.raises(TypeError, match="InitVar"):

        @dataclass(slots=True)
        class WithInitVar:
            a: dataclasses.InitVar[int]


def test_init_is_compiled_once_the_class_is_in_use() -> None:
    @dataclass(slots=True)
    class Lazy:
        a: int

    first = Lazy.__init__
    shared = [Lazy(i) for i in range(WARM_CALLS)]
    assert Lazy.__init__ is first  # a class made a few times is never compiled
    compiled = [Lazy(i) for i in range(WARM_CALLS)]
    assert Lazy.__init__ is not first and shared == compiled
    assert Lazy.__init__.__qualname__.endswith("Lazy.__init__")


@pytest.mark.parametrize("warm", [True, False], ids=["shared-init", "compiled-init"])
@pytest.mark.parametrize("frozen", [True, False])
def test_both_inits_fill_and_refuse_alike(warm: bool, frozen: bool) -> None:
    def make() -> Any:
        calls: list[str] = []

        @dataclass(slots=True, frozen=frozen)
        class Both:
            """Both."""

            a: int
            b: list[int] = dataclasses.field(default_factory=lambda: calls.append("b") or [1])  # type: ignore[func-returns-value]
            c: str = "c"
            d: dict[str, int] = dataclasses.field(default_factory=dict, init=False)
            e: int = dataclasses.field(default=5, kw_only=True)

            def __post_init__(self) -> None:
                calls.append("post")

        if not warm:
            for _ in range(WARM_CALLS):
                Both(0)
        calls.clear()
        return Both, calls

    cls, calls = make()
    made = cls(1, c="x", e=2)
    assert (made.a, made.b, made.c, made.d, made.e, calls) == (1, [1], "x", {}, 2, ["b", "post"])
    made = make()[0](1, [2], "y")
    assert (made.b, made.c, made.e) == ([2], "y", 5)
    for args, kwargs, message in [
        ((), {}, "missing 1 required positional argument: 'a'"),
        ((1, [], "c", 4), {}, "takes from 2 to 4 positional arguments but 5 were given"),
        ((1,), {"a": 2}, "got multiple values for argument 'a'"),
        ((1,), {"d": {}}, "got an unexpected keyword argument 'd'"),
    ]:
        with pytest.raises(TypeError, match=re.escape(message)):
            make()[0](*args, **kwargs)


def test_a_class_without_docstring_is_documented_without_parsing_signatures(monkeypatch: pytest.MonkeyPatch) -> None:
    # The standard decorator documents an undocumented class by its signature; for one whose __init__ is still
    # object's that parse (tokenize) costs millions of instructions at import, only to say "()".
    def no_signature(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("inspect.signature called")

    monkeypatch.setattr(inspect, "signature", no_signature)

    @dataclass(slots=True)
    class Plain:
        a: int = 0

    @dataclass(frozen=True)
    class PlainFrozen:
        a: int = 0

    assert (Plain.__doc__, PlainFrozen.__doc__) == ("Plain()", "PlainFrozen()")
    monkeypatch.undo()

    class Error(Exception):  # its __init__ is not object's: documented by the standard decorator, as before
        pass

    def subclass() -> type:
        return type("Failure", (Error,), {"__annotations__": {"a": int}})

    standard = dataclasses.dataclass(subclass(), init=False, repr=False, eq=False)
    assert dataclass(subclass()).__doc__ == standard.__doc__ == "Failure"


def test_a_usual_class_is_made_without_the_standard_per_field_lookups(monkeypatch: pytest.MonkeyPatch) -> None:
    # The standard decorator resolves each string annotation three times (ClassVar, InitVar, KW_ONLY): a third of
    # what 160 classes cost at import. A class whose annotations name none of them is made without that.
    def no_lookup(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("dataclasses._is_type called")

    monkeypatch.setattr(dataclasses, "_is_type", no_lookup)
    point = _point(dataclass)
    assert [f.name for f in dataclasses.fields(point)] == ["x", "y", "tags", "note", "seen"]
    assert point.__match_args__ == ("x", "y", "tags", "note")


@BOTH
def test_class_variables_and_kw_only_markers_are_not_fields(deco: Decorator) -> None:
    @deco(slots=True)
    class Marked:
        """Marked."""

        limit: ClassVar[int] = 3
        a: int
        _: dataclasses.KW_ONLY
        b: int = 0

    assert [(f.name, f.kw_only) for f in dataclasses.fields(Marked)] == [("a", False), ("b", True)]
    assert Marked.limit == 3 and Marked(1, b=2).b == 2 and Marked.__match_args__ == ("a",)


@BOTH
def test_a_mutable_default_and_an_unannotated_field_are_refused(deco: Decorator) -> None:
    with pytest.raises(ValueError, match="mutable default"):

        @deco
        class Mutable:
            items: list[int] = []

    with pytest.raises(TypeError, match="no type annotation"):

        @deco
        class Unannotated:
            a = dataclasses.field(default=1)


def test_a_slotted_class_is_made_with_its_methods_in_place() -> None:
    # Each assignment to a class re-derives its type slots; the standard decorator assigns a dozen names after
    # making the class, then makes it again for the slots. A slotted class is made once more, with all of them.
    assigned: list[str] = []

    class Watched(type):
        def __setattr__(cls, name: str, value: Any) -> None:
            assigned.append(name)
            super().__setattr__(name, value)

    @dataclass(slots=True, frozen=True)
    class Point(metaclass=Watched):
        """A point."""

        x: int
        y: int = 0

    assert assigned == []
    assert Point(1) == Point(1, 0) and hash(Point(1)) == hash(Point(1, 0))
    assert repr(Point(1)).endswith(".Point(x=1, y=0)")
    assert Point.__slots__ == ("x", "y") and type(Point) is Watched
    with pytest.raises(dataclasses.FrozenInstanceError):
        Point(1).x = 2  # type: ignore[misc]
