"""``dataclass``: the standard decorator, without generating code for every class at import.

The standard ``@dataclass`` writes the source of ``__init__``, ``__repr__``, ``__eq__`` (and, when
frozen, ``__setattr__``, ``__delattr__``, ``__hash__``) for each class and compiles each with
``exec``: 3-5 million instructions per class on Python 3.11, and a ``nexus run`` imports more than
a hundred such classes, most of which it never instantiates. That was the largest part of its
start-up after the libraries it cannot do without.

This decorator makes the class what the standard one makes with ``init=False, repr=False, eq=False``
and ``frozen=False`` (a real dataclass: ``fields``, ``replace``, ``asdict`` and ``__match_args__``
work as before; a class of the usual kind gets its fields here, without the standard decorator's
per-field annotation lookups, and a slotted one is made anew once, with its methods in its namespace; any other
is handed to it) and adds the methods itself: ``__repr__``,
``__eq__``, ``__hash__`` and the frozen guards are shared functions bound to a few per-class
values; the first ``WARM_CALLS`` instances are filled by a shared ``__init__``, after which the
class's own is compiled, to the same code the standard decorator would have written, so a class in
use runs at full speed and a class made once or never pays no compile. The behaviour is the standard one for what
nexus uses (``slots``, ``frozen``, ``kw_only``, ``eq``; ``field`` with ``default``,
``default_factory``, ``init``, ``repr``, ``compare``, ``hash``, ``kw_only``; ``__post_init__``);
anything else is refused when the class is defined. ``tests/test_dataclass.py`` holds the two side
by side.
"""

from __future__ import annotations

import abc
import dataclasses
import inspect
import operator
import sys
import threading
import types
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = ["dataclass"]

T = TypeVar("T")

_FACTORY = object()
"""Default of a parameter whose field has a ``default_factory``: "not given, call the factory"."""


@overload
def dataclass(cls: type[T], /) -> type[T]: ...


@overload
def dataclass(
    *, slots: bool = False, frozen: bool = False, kw_only: bool = False, eq: bool = True
) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def dataclass(
    cls: type[T] | None = None, /, *, slots: bool = False, frozen: bool = False, kw_only: bool = False, eq: bool = True
) -> type[T] | Callable[[type[T]], type[T]]:
    """``@dataclasses.dataclass`` with these options, its methods made without per-class code at import."""

    def wrap(cls: type[T]) -> type[T]:
        return _process(cls, slots=slots, frozen=frozen, kw_only=kw_only, eq=eq)

    return wrap if cls is None else wrap(cls)


def _process(cls: type[T], *, slots: bool, frozen: bool, kw_only: bool, eq: bool) -> type[T]:
    own = cls.__dict__
    for name in ("__init__", "__repr__", "__eq__") + (("__setattr__", "__delattr__") if frozen else ()):
        if name in own:
            raise TypeError(f"{cls.__qualname__} defines {name}: use dataclasses.dataclass for it")
    if cls.__doc__ is None and _object_signature(cls):
        # What the standard decorator writes for it, without asking ``inspect.signature``: that parses
        # ``object.__init__``'s text signature with ``tokenize`` (whose first use compiles its large
        # pattern, ~10 M instructions) only to say "()".
        cls.__doc__ = f"{cls.__name__}()"
    fields = _usual_fields(cls, kw_only=kw_only) if FIELDS_HERE else None
    home: list[type] = []  # the finished class, for the methods that need it (a slotted class is made anew)
    if fields is None:
        cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False, slots=slots, kw_only=kw_only)
        if any("InitVar" in str(annotation) for annotation in inspect.get_annotations(cls).values()):
            raise TypeError(f"{cls.__qualname__}: InitVar is not supported here; use dataclasses.dataclass")
        home.append(cls)
        members = _methods(home, cls.__qualname__, dataclasses.fields(cls), own, slots=slots, frozen=frozen, eq=eq)  # type: ignore[arg-type]
        for name, value in members.items():
            setattr(cls, name, value)
        return cls
    members = _methods(home, cls.__qualname__, tuple(fields.values()), own, slots=slots, frozen=frozen, eq=eq)
    members["__dataclass_params__"] = _params(slots, kw_only)
    members["__dataclass_fields__"] = fields
    if "__match_args__" not in own:
        members["__match_args__"] = tuple([f.name for f in fields.values() if f.init and not f.kw_only])
    if not cls.__doc__:
        try:
            signature = str(inspect.signature(cls)).replace(" -> None", "")
        except (TypeError, ValueError):
            signature = ""
        members["__doc__"] = cls.__name__ + signature
    cls = _slotted(cls, fields, members) if slots else _unslotted(cls, fields, members)
    home.append(cls)
    abc.update_abstractmethods(cls)
    return cls


def _methods(
    home: list[type],
    qualname: str,
    fields: tuple[dataclasses.Field[Any], ...],
    own: Any,
    *,
    slots: bool,
    frozen: bool,
    eq: bool,
) -> dict[str, Any]:
    """The methods the decorator adds to the class (``home[0]`` once it is made), by name."""
    _check_init_order(fields)
    methods: dict[str, Any] = {
        "__init__": _first_init(home, qualname),
        "__repr__": _make_repr([f.name for f in fields if f.repr]),
        "__nexus_frozen__": frozen,
    }
    if eq:
        compared = [f.name for f in fields if f.compare]
        key = _key(compared)
        methods["__eq__"] = _make_eq(key)
        if "__hash__" not in own:
            hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
            methods["__hash__"] = (_make_hash(key if hashed == compared else _key(hashed))) if frozen else None
    if frozen:
        names = frozenset([f.name for f in fields])
        methods["__setattr__"] = _make_frozen_setattr(home, names)
        methods["__delattr__"] = _make_frozen_delattr(home, names)
        if slots:
            methods["__getstate__"], methods["__setstate__"] = _getstate, _setstate
    return methods


# --------------------------------------------------------------------------- fields, without the standard checks' cost


_UNUSUAL = ("ClassVar", "InitVar", "KW_ONLY")
"""Annotations the standard decorator looks up (each field's string is matched and resolved three times, a
third of its cost at import): a class that names one of them goes the standard way."""


FIELDS_HERE = sys.version_info[:2] == (3, 11) and hasattr(dataclasses, "_add_slots")
"""Whether usual classes get their fields here (:func:`_fields_only`): it writes the standard decorator's private
parts (``Field._field_type``, ``_add_slots``), so only on the Python whose decorator the tests compare it with;
on any other every class goes the standard way (slower to import, never wrong)."""


_PARAMS: dict[tuple[bool, bool], Any] = {}
"""The standard decorator's ``__dataclass_params__`` for these options, by (slots, kw_only): taken from a class
it made, so they are what it writes on any Python version."""


def _params(slots: bool, kw_only: bool) -> Any:
    params = _PARAMS.get((slots, kw_only))
    if params is None:
        made: Any = dataclasses.dataclass(
            type("_Plain", (), {"__doc__": "-"}), init=False, repr=False, eq=False, slots=slots, kw_only=kw_only
        )
        params = _PARAMS[slots, kw_only] = made.__dataclass_params__
    return params


def _field_kind() -> Any:
    """The standard decorator's mark of a real field (not a ``ClassVar`` or ``InitVar``)."""
    made: Any = dataclasses.dataclass(
        type("_Plain", (), {"__doc__": "-", "__annotations__": {"x": "int"}}), init=False, repr=False, eq=False
    )
    return made.__dataclass_fields__["x"]._field_type


_FIELD = _field_kind() if FIELDS_HERE else None


def _usual_fields(cls: type, *, kw_only: bool) -> dict[str, dataclasses.Field[Any]] | None:
    """The fields ``dataclasses.dataclass(cls, kw_only=kw_only)`` would make, for a class of the usual kind (string
    annotations naming no ``ClassVar``/``InitVar``/``KW_ONLY``, no dataclass base, no mutable default, no field
    without annotation); None for any other class (the caller asks the standard decorator)."""
    own = cls.__dict__
    annotations = own.get("__annotations__", {})  # what the standard decorator reads: this class's own
    try:
        text = "\n".join(annotations.values())  # one search of all of them: a generator per field costs more
    except TypeError:
        return None  # an annotation that is not a string
    bases = cls.__mro__[1:-1]  # besides object: usually none (generators and failed lookups cost more than the rest)
    if [word for word in _UNUSUAL if word in text] or any([hasattr(base, "__dataclass_fields__") for base in bases]):
        return None
    missing = dataclasses.MISSING
    fields: dict[str, dataclasses.Field[Any]] = {}
    for name, annotation in annotations.items():
        default: Any = getattr(cls, name, missing) if bases else own.get(name, missing)
        if isinstance(default, dataclasses.Field):
            f = default
            if f.kw_only is missing:
                f.kw_only = kw_only
        else:
            if default.__class__ is _SLOT:  # a slot of a base: no default
                default = missing
            f = _Field(default, missing, True, True, None, True, None, kw_only)
        if f.default is not missing and f.default.__class__.__hash__ is None:
            return None  # a mutable default: the standard decorator says why it refuses it
        f.name, f.type = name, annotation
        f._field_type = _FIELD  # type: ignore[attr-defined]
        fields[name] = f
    for key, value in own.items():
        if isinstance(value, dataclasses.Field) and key not in annotations:
            return None  # a field without annotation: refused there
    return fields


_Field: Any = dataclasses.Field  # its constructor, without ``field``'s keyword handling
_SLOT = types.MemberDescriptorType


def _slotted(cls: type[T], fields: dict[str, dataclasses.Field[Any]], members: dict[str, Any]) -> type[T]:
    """``cls`` made anew with a slot for each field and ``members`` in its namespace: what the standard
    ``_add_slots`` does, with the methods in place from the start instead of set one by one afterwards (each
    assignment to a class re-derives its type slots)."""
    namespace = dict(cls.__dict__)
    if "__slots__" in namespace:
        raise TypeError(f"{cls.__name__} already specifies __slots__")
    inherited: set[str] = set()
    for base in cls.__mro__[1:-1]:
        inherited.update(dataclasses._get_slots(base))  # type: ignore[attr-defined]
    namespace["__slots__"] = tuple([name for name in fields if name not in inherited])
    for name in fields:
        namespace.pop(name, None)
    namespace.pop("__dict__", None)
    namespace.pop("__weakref__", None)
    namespace.update(members)
    namespace["__qualname__"] = cls.__qualname__
    metaclass: Any = type(cls)
    made: type[T] = metaclass(cls.__name__, cls.__bases__, namespace)
    return made


def _unslotted(cls: type[T], fields: dict[str, dataclasses.Field[Any]], members: dict[str, Any]) -> type[T]:
    """``cls`` with ``members`` set, and each field's class attribute what the standard decorator leaves: the
    default, or nothing for a field without one."""
    for f in fields.values():
        if isinstance(cls.__dict__.get(f.name), dataclasses.Field):
            if f.default is dataclasses.MISSING:
                delattr(cls, f.name)
            else:
                setattr(cls, f.name, f.default)
    for name, value in members.items():
        setattr(cls, name, value)
    return cls


def _object_signature(cls: type) -> bool:
    """Whether ``inspect.signature(cls)`` is ``()``: nothing between the class and ``object`` that
    construction goes through (the class's ``__init__`` is ours, written after this point)."""
    return (
        type(cls) is type
        and cls.__init__ is object.__init__  # type: ignore[misc]
        and cls.__new__ is object.__new__  # type: ignore[comparison-overlap]
    )


def _check_init_order(fields: tuple[dataclasses.Field[Any], ...]) -> None:
    """TypeError for what the standard decorator refuses when it writes ``__init__``."""
    seen_default = False
    for f in fields:
        if not f.init or f.kw_only:
            continue
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        if seen_default and not has_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        seen_default = seen_default or has_default


# ------------------------------------------------------------------- __init__: shared, then compiled when in use


WARM_CALLS = 8
"""Instances a class makes through the shared ``__init__`` before its own is compiled. Compiling one costs about
0.6 M instructions, and a ``nexus run`` makes 65 classes, most of them once or twice; a class in a hot path
reaches this count at once and runs compiled from then on."""

_Plan = tuple[tuple[str, ...], frozenset[str], frozenset[str], tuple[tuple[str, bool, Any, Any], ...], bool, bool]
"""How ``__init__`` fills a class: positional names, keyword-only names, required names, the steps
(name, is a parameter, factory or None, default) in field order, frozen, has ``__post_init__``."""


def _first_init(home: list[type], qualname: str) -> Callable[..., None]:
    """The class's ``__init__`` until it is compiled; ``home`` holds the class once it is made."""
    plan: _Plan | None = None
    calls = 0

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal plan, calls
        cls = home[0]
        calls += 1
        if calls <= WARM_CALLS:
            if plan is None:
                plan = _plan(cls)
            if _shared_init(plan, self, args, kwargs):
                return
        init = _compile_init(cls)  # after WARM_CALLS, or for arguments it does not take (it raises the error)
        setattr(cls, "__init__", init)  # noqa: B010  (mypy: no assigning a method)
        init(self, *args, **kwargs)

    __init__.__qualname__ = f"{qualname}.__init__"
    return __init__


def _plan(cls: type) -> _Plan:
    positional: list[str] = []
    keywords: set[str] = set()
    required: set[str] = set()
    steps: list[tuple[str, bool, Any, Any]] = []
    for f in dataclasses.fields(cls):
        factory = None if f.default_factory is dataclasses.MISSING else f.default_factory
        if f.init:
            if f.kw_only:
                keywords.add(f.name)
            else:
                positional.append(f.name)
            if factory is None and f.default is dataclasses.MISSING:
                required.add(f.name)
        elif factory is None and f.default is dataclasses.MISSING:
            continue
        steps.append((f.name, f.init, factory, f.default))
    frozen = cls.__nexus_frozen__  # type: ignore[attr-defined]
    return (
        tuple(positional),
        frozenset(keywords),
        frozenset(required),
        tuple(steps),
        frozen,
        hasattr(cls, "__post_init__"),
    )


def _shared_init(plan: _Plan, self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Do what the compiled ``__init__`` does with these arguments; False (nothing done) for arguments it would
    refuse, so that it raises its own error."""
    positional, keywords, required, steps, frozen, post_init = plan
    if len(args) > len(positional):
        return False
    given = dict(zip(positional, args, strict=False))
    for name, value in kwargs.items():
        if name in given or (name not in keywords and name not in positional):
            return False
        given[name] = value
    if not required.issubset(given):
        return False
    assign = object.__setattr__ if frozen else setattr
    for name, parameter, factory, default in steps:
        if parameter and name in given:
            value = given[name]
        elif factory is not None:
            value = factory()
        else:
            value = default
        assign(self, name, value)
    if post_init:
        self.__post_init__()
    return True


def _compile_init(cls: type) -> Callable[..., None]:
    """The ``__init__`` the standard decorator would have written for ``cls``."""
    fields = dataclasses.fields(cls)
    frozen = cls.__nexus_frozen__  # type: ignore[attr-defined]
    defaults: dict[str, Any] = {}
    factories: dict[str, Callable[[], Any]] = {}
    positional: list[str] = []
    keywords: list[str] = []
    body: list[str] = []
    setters: dict[str, Callable[[Any, Any], None]] = {}
    for f in fields:
        factory = f.default_factory is not dataclasses.MISSING
        if factory:
            factories[f.name] = f.default_factory  # type: ignore[assignment]
        elif f.default is not dataclasses.MISSING:
            defaults[f.name] = f.default
        if f.init:
            if factory:
                param, value = f"{f.name}=_FACTORY", f"_factories[{f.name!r}]() if {f.name} is _FACTORY else {f.name}"
            elif f.default is not dataclasses.MISSING:
                param, value = f"{f.name}=_defaults[{f.name!r}]", f.name
            else:
                param, value = f.name, f.name
            (keywords if f.kw_only else positional).append(param)
        elif factory:
            value = f"_factories[{f.name!r}]()"
        elif f.default is not dataclasses.MISSING:
            value = f"_defaults[{f.name!r}]"
        else:
            continue
        body.append(_frozen_set(cls, f.name, value, setters) if frozen else f"self.{f.name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    params = ", ".join(["self", *positional, *(["*", *keywords] if keywords else [])])
    source = f"def __init__({params}):\n" + "".join(f"    {line}\n" for line in body or ["pass"])
    namespace: dict[str, Any] = {
        "_FACTORY": _FACTORY,
        "_defaults": defaults,
        "_factories": factories,
        "_setattr": object.__setattr__,
        **setters,
    }
    exec(compile(source, f"<{cls.__module__}.{cls.__qualname__}.__init__>", "exec"), namespace)
    init: Callable[..., None] = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    return init


def _frozen_set(cls: type, name: str, value: str, setters: dict[str, Callable[[Any, Any], None]]) -> str:
    """The line of a frozen ``__init__`` that sets ``name``: through its slot's own setter when it has a slot
    (what ``object.__setattr__`` ends up calling, without looking the name up: ~30 % of the time of an
    ``__init__`` that sets 14 fields, and the broker makes several such records a message)."""
    slot = inspect.getattr_static(cls, name, None)
    if isinstance(slot, types.MemberDescriptorType):
        setters[f"_set_{name}"] = slot.__set__
        return f"_set_{name}(self, {value})"
    return f"_setattr(self, {name!r}, {value})"


# --------------------------------------------------------------------------- shared methods


def _key(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of these attributes (always a tuple, as the standard ``__eq__``/``__hash__`` compare)."""
    if len(names) == 1:
        (name,) = names
        return lambda obj: (getattr(obj, name),)
    if not names:
        return lambda obj: ()
    getter = operator.attrgetter(*names)
    return getter


def _make_eq(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, object], Any]:
    def __eq__(self: Any, other: object) -> Any:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    return __eq__


def _make_hash(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(key(self))

    return __hash__


_repr_running = threading.local()


def _make_repr(names: list[str]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        running: set[int] | None = getattr(_repr_running, "ids", None)
        if running is None:
            running = _repr_running.ids = set()
        if id(self) in running:
            return "..."
        running.add(id(self))
        try:
            fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        finally:
            running.discard(id(self))
        return f"{self.__class__.__qualname__}({fields})"

    return __repr__


def _make_frozen_setattr(home: list[type], names: frozenset[str]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is home[0] or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)  # nexus's dataclasses have no base but object

    return __setattr__


def _make_frozen_delattr(home: list[type], names: frozenset[str]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is home[0] or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        object.__delattr__(self, name)

    return __delattr__


def _getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in dataclasses.fields(self)]


def _setstate(self: Any, state: list[Any]) -> None:
    for f, value in zip(dataclasses.fields(self), state, strict=False):
        object.__setattr__(self, f.name, value)
