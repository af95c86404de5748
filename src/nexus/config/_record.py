"""Strict, frozen records for the tables of ``nexus.toml``, validated without pydantic.

Every command loads the config, and pydantic was the largest part of a whole ``nexus run``:
importing it and building a validator for each of the file's fifteen tables cost more than
100 ms of CPU. The file needs a small part of what pydantic does, and this module does just that
part: strings, integers, numbers, booleans, ``Literal`` choices, lists, string-keyed tables,
nested records, ``X | None`` and unions of scalars; the bounds ``gt``/``ge``/``le`` and
``min_length``; checks of one field (:func:`field_check`) and of a whole record
(:func:`record_check`). Nothing is coerced (``"25"`` is no integer; an integer is a number) and
unknown keys are errors.

Every problem of a file is reported at once, each as pydantic reported it (``type``, ``loc``,
``msg``, ``input``), so ``nexus.config._load`` words its messages as before. The methods callers
use have pydantic's names (``model_validate``, ``model_dump``, ``model_copy``,
``model_fields_set``). A field's annotation is read the first time a value is checked against it, not
at import.
"""

from __future__ import annotations

import inspect
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Literal, TypeVar, Union, dataclass_transform

__all__ = ["Record", "RecordError", "field_check", "record_check", "setting"]

R = TypeVar("R", bound="Record")
ErrorDict = dict[str, Any]
Loc = tuple[str | int, ...]

_MISSING: Any = object()
_SCALAR_ERRORS: dict[type, tuple[str, str]] = {
    str: ("string_type", "Input should be a valid string"),
    int: ("int_type", "Input should be a valid integer"),
    float: ("float_type", "Input should be a valid number"),
    bool: ("bool_type", "Input should be a valid boolean"),
}


class RecordError(ValueError):
    """The problems found validating a record: :meth:`errors` lists them as pydantic's ``ValidationError`` does."""

    def __init__(self, title: str, problems: list[ErrorDict]) -> None:
        self.title = title
        self.problems = problems
        lines = [f"{len(problems)} validation error(s) for {title}"]
        lines += [f"{'.'.join(map(str, p['loc'])) or '(top level)'}: {p['msg']}" for p in problems]
        super().__init__("\n".join(lines))

    def errors(self) -> list[ErrorDict]:
        """One dict per problem: ``type``, ``loc`` (key path), ``msg`` and ``input`` (the value found)."""
        return list(self.problems)


class _Setting:
    """A field's default and bounds, as :func:`setting` declares them."""

    __slots__ = ("default", "default_factory", "ge", "gt", "le", "min_length")

    def __init__(
        self,
        default: Any,
        default_factory: Callable[[], Any] | None,
        gt: float | None,
        ge: float | None,
        le: float | None,
        min_length: int | None,
    ) -> None:
        self.default, self.default_factory = default, default_factory
        self.gt, self.ge, self.le, self.min_length = gt, ge, le, min_length

    def make_default(self) -> Any:
        return self.default_factory() if self.default_factory is not None else self.default


def setting(
    default: Any = _MISSING,
    *,
    default_factory: Callable[[], Any] | None = None,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
    min_length: int | None = None,
) -> Any:
    """A field with a default (or ``default_factory``) and bounds: ``max_iterations: int = setting(25, gt=0)``."""
    return _Setting(default, default_factory, gt, ge, le, min_length)


def field_check(*names: str) -> Callable[[Callable[[Any], Any]], Any]:
    """Mark a function ``(value) -> value`` as a check of the fields ``names``, run after their type is checked.

    A ``ValueError`` it raises is reported at the field, as ``value_error``.
    """

    def mark(function: Callable[[Any], Any]) -> Any:
        function.__field_check__ = names  # type: ignore[attr-defined]
        return staticmethod(function)

    return mark


def record_check(function: Callable[[Any], None]) -> Callable[[Any], None]:
    """Mark a method ``(self) -> None`` as a check of the whole record, run when all its fields are valid."""
    function.__record_check__ = True  # type: ignore[attr-defined]
    return function


class _Field:
    """A field's name, default and bounds, and its annotation, resolved when a value is first checked against it.

    Most tables of a ``nexus.toml`` are absent and get their defaults; resolving every field's annotation of
    every table (an ``eval`` each: 91 for a file naming one provider) was a third of loading the config.
    """

    __slots__ = ("_annotation", "_namespace", "name", "setting")

    def __init__(self, name: str, annotation: Any, setting: _Setting, namespace: dict[str, Any]) -> None:
        self.name, self._annotation, self.setting, self._namespace = name, annotation, setting, namespace

    @property
    def annotation(self) -> Any:
        """The field's type (the string annotation evaluated in the record's module, once)."""
        if isinstance(self._annotation, str):
            self._annotation = eval(self._annotation, self._namespace)
        return self._annotation


@dataclass_transform(kw_only_default=True, field_specifiers=(setting,))
class Record:
    """Base of the config tables: keyword construction validates; instances are frozen and compare by value.

    Subclasses declare fields as annotations with a plain default or a :func:`setting`; a field
    without one is required. Attributes whose names start with ``_`` are not fields and may be set
    (their class-level value is the default). Type checkers see a keyword-only dataclass.
    """

    _declared: ClassVar[list[tuple[str, str, _Setting]]] = []
    __fields: ClassVar[dict[str, _Field] | None] = None
    _field_checks: ClassVar[dict[str, list[Callable[[Any], Any]]]] = {}
    _record_checks: ClassVar[list[Callable[[Any], None]]] = []
    _value_aliases: ClassVar[dict[str, Mapping[str, Any]]] = {}
    """Per field, other spellings of a string value taken as the canonical one before it is checked
    (the queue mode ``steer+backlog`` the docs accept beside ``steer-backlog``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared: list[tuple[str, str, _Setting]] = []
        for name, annotation in inspect.get_annotations(cls).items():
            if name.startswith("_") or str(annotation).startswith(("ClassVar", "typing.ClassVar")):
                continue
            value = cls.__dict__.get(name, _MISSING)
            if not isinstance(value, _Setting):
                value = _Setting(value, None, None, None, None, None)
            if name in cls.__dict__:
                delattr(cls, name)
            declared.append((name, annotation, value))
        cls._declared = declared
        cls.__fields = None
        checks: dict[str, list[Callable[[Any], Any]]] = {}
        record_checks: list[Callable[[Any], None]] = []
        for value in cls.__dict__.values():
            function = value.__func__ if isinstance(value, staticmethod) else value
            for name in getattr(function, "__field_check__", ()):
                checks.setdefault(name, []).append(function)
            if getattr(function, "__record_check__", False):
                record_checks.append(function)
        cls._field_checks = checks
        cls._record_checks = record_checks

    @classmethod
    def record_fields(cls) -> dict[str, _Field]:
        """The fields in declaration order (made on first use; each resolves its annotation when first needed)."""
        fields = cls.__dict__.get("_Record__fields")
        if fields is None:
            namespace = vars(sys.modules[cls.__module__])
            fields = {name: _Field(name, annotation, spec, namespace) for name, annotation, spec in cls._declared}
            cls.__fields = fields
        return fields

    def __init__(self, **values: Any) -> None:
        problems: list[ErrorDict] = []
        _fill(self, values, (), problems)
        if problems:
            raise RecordError(type(self).__name__, problems)

    @classmethod
    def model_validate(cls: type[R], data: Any) -> R:
        """``data`` (a table from TOML, or an instance) checked and turned into a record; RecordError if not valid."""
        problems: list[ErrorDict] = []
        record = _validate_record(cls, data, (), problems)
        if problems:
            raise RecordError(cls.__name__, problems)
        return typing.cast(R, record)

    @property
    def model_fields_set(self) -> set[str]:
        """The fields that were given, not defaulted."""
        return set(self.__dict__["_Record__given"])

    def model_dump(self, *, exclude: Iterable[str] = (), exclude_none: bool = False) -> dict[str, Any]:
        """The fields as plain dicts and lists (nested records too); ``exclude`` drops top-level fields."""
        skip = set(exclude)
        out = {}
        for name in self.record_fields():
            value = getattr(self, name)
            if name not in skip and not (exclude_none and value is None):
                out[name] = _dump(value, exclude_none)
        return out

    def model_copy(self: R, *, update: Mapping[str, Any] | None = None) -> R:
        """A copy with the fields in ``update`` replaced (not validated, like pydantic's)."""
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        for name, value in (update or {}).items():
            copy.__dict__[name] = value
        copy.__dict__["_Record__given"] = frozenset(self.model_fields_set | set(update or {}))
        return copy

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_"):
            raise AttributeError(f"{type(self).__name__} is frozen: {name} cannot be changed")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: {name} cannot be deleted")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.record_fields())

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash((type(self), self._values()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{name}={getattr(self, name)!r}' for name in self.record_fields())})"

    def __str__(self) -> str:
        return " ".join(f"{name}={getattr(self, name)!r}" for name in self.record_fields())


def _dump(value: Any, exclude_none: bool) -> Any:
    if isinstance(value, Record):
        return value.model_dump(exclude_none=exclude_none)
    if isinstance(value, dict):
        return {key: _dump(item, exclude_none) for key, item in value.items()}
    if isinstance(value, list):
        return [_dump(item, exclude_none) for item in value]
    return value


# --------------------------------------------------------------------------- validation


def _problem(problems: list[ErrorDict], kind: str, loc: Loc, msg: str, value: Any) -> None:
    problems.append({"type": kind, "loc": loc, "msg": msg, "input": value})


def _fill(record: Record, data: Mapping[str, Any], loc: Loc, problems: list[ErrorDict]) -> bool:
    """Set ``record``'s fields from ``data``; False (and ``problems`` grown) when something is wrong."""
    cls = type(record)
    fields = cls.record_fields()
    before = len(problems)
    given = []
    for name, field in fields.items():
        if name in data:
            found, raw = len(problems), data[name]
            if type(raw) is str and name in cls._value_aliases:
                raw = cls._value_aliases[name].get(raw, raw)
            value = _validate(field.annotation, raw, (*loc, name), problems, field.setting)
            for check in cls._field_checks.get(name, ()):
                if len(problems) > found:
                    break
                try:
                    value = check(value)
                except ValueError as exc:
                    _problem(problems, "value_error", (*loc, name), f"Value error, {exc}", data[name])
            given.append(name)
        elif field.setting.default is _MISSING and field.setting.default_factory is None:
            _problem(problems, "missing", (*loc, name), "Field required", dict(data))
            continue
        else:
            value = field.setting.make_default()
        object.__setattr__(record, name, value)
    for key, value in data.items():
        if key not in fields:
            _problem(problems, "extra_forbidden", (*loc, key), "Extra inputs are not permitted", value)
    object.__setattr__(record, "_Record__given", frozenset(given))
    if len(problems) > before:
        return False
    for check in cls._record_checks:
        try:
            check(record)
        except ValueError as exc:
            _problem(problems, "value_error", loc, f"Value error, {exc}", dict(data))
            return False
    return True


def _validate_record(cls: type[Record], value: Any, loc: Loc, problems: list[ErrorDict]) -> Any:
    if isinstance(value, cls):
        return value
    if not isinstance(value, dict):
        message = f"Input should be a valid dictionary or instance of {cls.__name__}"
        _problem(problems, "model_type", loc, message, value)
        return None
    record = object.__new__(cls)
    _fill(record, value, loc, problems)
    return record


def _validate(annotation: Any, value: Any, loc: Loc, problems: list[ErrorDict], bounds: _Setting | None) -> Any:
    """``value`` checked against ``annotation`` (problems appended at ``loc``); the value to keep."""
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        return _validate_union(typing.get_args(annotation), value, loc, problems, bounds)
    if origin is Literal:
        choices = typing.get_args(annotation)
        if value not in choices or type(value) not in {type(choice) for choice in choices}:
            expected = ", ".join(repr(choice) for choice in choices[:-1])
            expected = f"{expected} or {choices[-1]!r}" if expected else repr(choices[-1])
            _problem(problems, "literal_error", loc, f"Input should be {expected}", value)
        return value
    if origin is list:
        if not isinstance(value, list):
            _problem(problems, "list_type", loc, "Input should be a valid list", value)
            return value
        (item_type,) = typing.get_args(annotation)
        return [_validate(item_type, item, (*loc, index), problems, None) for index, item in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            _problem(problems, "dict_type", loc, "Input should be a valid dictionary", value)
            return value
        item_type = typing.get_args(annotation)[1]
        return {key: _validate(item_type, item, (*loc, key), problems, None) for key, item in value.items()}
    if isinstance(annotation, type) and issubclass(annotation, Record):
        return _validate_record(annotation, value, loc, problems)
    return _validate_scalar(annotation, value, loc, problems, bounds)


def _validate_union(
    members: tuple[Any, ...], value: Any, loc: Loc, problems: list[ErrorDict], bounds: _Setting | None
) -> Any:
    if value is None and type(None) in members:
        return None
    options = [member for member in members if member is not type(None)]
    if len(options) == 1:
        return _validate(options[0], value, loc, problems, bounds)
    for member in options:  # unions of scalars: the first type that takes the value as it is
        if _scalar_fits(member, value):
            return _validate_scalar(member, value, loc, problems, bounds)
    for member in options:
        _validate_scalar(member, value, (*loc, member.__name__), problems, None)
    return value


def _scalar_fits(kind: type, value: Any) -> bool:
    if kind is bool or kind is int:
        return type(value) is kind
    if kind is float:
        return type(value) in (int, float)
    return isinstance(value, kind)


def _validate_scalar(kind: Any, value: Any, loc: Loc, problems: list[ErrorDict], bounds: _Setting | None) -> Any:
    if not _scalar_fits(kind, value):
        error, message = _SCALAR_ERRORS[kind]
        _problem(problems, error, loc, message, value)
        return value
    if bounds is not None:
        _check_bounds(bounds, value, loc, problems)
    return float(value) if kind is float else value


def _check_bounds(bounds: _Setting, value: Any, loc: Loc, problems: list[ErrorDict]) -> None:
    if bounds.min_length is not None and len(value) < bounds.min_length:
        noun = "character" if bounds.min_length == 1 else "characters"
        message = f"String should have at least {bounds.min_length} {noun}"
        _problem(problems, "string_too_short", loc, message, value)
    elif bounds.gt is not None and not value > bounds.gt:
        _problem(problems, "greater_than", loc, f"Input should be greater than {bounds.gt}", value)
    elif bounds.ge is not None and not value >= bounds.ge:
        _problem(problems, "greater_than_equal", loc, f"Input should be greater than or equal to {bounds.ge}", value)
    elif bounds.le is not None and not value <= bounds.le:
        _problem(problems, "less_than_equal", loc, f"Input should be less than or equal to {bounds.le}", value)
