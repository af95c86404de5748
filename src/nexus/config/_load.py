"""Read ``nexus.toml`` and turn every problem into one ConfigError that says where and how to fix it."""

from __future__ import annotations

import os
import re
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nexus.config._paths import CONFIG_FILE_NAME, config_path, nexus_home
from nexus.config._record import Record, RecordError
from nexus.config._schema import LocalModelConfig, NexusConfig
from nexus.config._toml_lines import Loc, key_lines, line_of, nesting_overflow_line
from nexus.errors import ConfigError

_SECRET_HINTS = ("key", "token", "secret", "password", "header", "auth")
_TOML_TYPE = {
    str: "a string",
    int: "an integer",
    float: "a float",
    bool: "a boolean",
    list: "an array",
    dict: "a table",
}


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> NexusConfig:
    """Load and validate the config; a missing default file means defaults plus the environment.

    ``path`` overrides ``$NEXUS_CONFIG`` / ``$NEXUS_HOME/nexus.toml``. A file named on purpose
    (``path``, or ``$NEXUS_CONFIG``) that does not exist is an error: read as "no file", a typo in
    the name ran on the defaults, maybe against another provider than the one the file configures.
    Only the default file may be missing. ``${VAR}`` references stay as written until used.
    """
    source_env = os.environ if env is None else env
    home = nexus_home(source_env)
    file = Path(path).expanduser() if path is not None else config_path(source_env)
    if not file.exists():
        if path is not None:
            default = config_path(source_env)
            raise ConfigError(f"config file {file} not found: check the path, or omit it to use {default}")
        if source_env.get("NEXUS_CONFIG", "").strip():
            raise ConfigError(
                f"config file {file} (named by $NEXUS_CONFIG) not found: check the path, or unset NEXUS_CONFIG "
                f"to use {home / CONFIG_FILE_NAME}"
            )
        return _finish(NexusConfig(), home, None)
    return _finish(parse_config(read_config_text(file), file), home, file)


def read_config_text(file: Path) -> str:
    """The text of the existing config file ``file``, a leading byte-order mark dropped, or a :class:`ConfigError`
    saying why it cannot be read. The loader and the config editor (``nexus adapters``, ``nexus mcp``) both read
    through it, so the file they edit is read as the one every command loads."""
    if file.is_dir():
        raise ConfigError(f"config file {file} is a directory: name the file in it (e.g. {file / CONFIG_FILE_NAME})")
    try:
        return file.read_text(encoding="utf-8").removeprefix(BOM)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {file}: {exc}; fix its permissions or encoding (UTF-8)") from exc


BOM = "\ufeff"
"""The byte-order mark some Windows editors put first in a UTF-8 file: no TOML, but no mistake of the user's
either (it read as "TOML syntax error (column 1): Invalid statement" on a line that looks right)."""


MAX_NESTING = 32
"""Deepest nesting of arrays/inline tables a value may have. No setting needs more than a few
levels; far deeper input (``a = [[[…5000…]]]``) would exhaust Python's recursion limit in the
TOML parser and the validator, so it is refused first with a clear message."""


def parse_config(text: str, file: Path | str = "nexus.toml") -> NexusConfig:
    """Validate TOML ``text`` (``file`` only names it in error messages)."""
    _check_nesting(text, file)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(_syntax_message(str(exc), file)) from exc
    except RecursionError:  # nesting the scan above could not see (it is a locator, not a parser)
        raise ConfigError(_nesting_message(str(file), None)) from None
    try:
        config = NexusConfig.model_validate(data)
    except RecordError as exc:
        raise ConfigError(format_validation_errors(exc, text, file)) from None
    except RecursionError:
        raise ConfigError(_nesting_message(str(file), None)) from None
    config._text = text
    config._label = str(file)
    problems = _tool_name_problems(config) + _local_model_problems(config)
    if problems:
        count = len(problems)
        raise ConfigError("\n".join([f"invalid config ({count} problem{'s' if count != 1 else ''}):", *problems]))
    return config


def _check_nesting(text: str, file: Path | str) -> None:
    """ConfigError naming the line where arrays/inline tables nest deeper than :data:`MAX_NESTING`."""
    line = nesting_overflow_line(text, MAX_NESTING)
    if line is not None:
        raise ConfigError(_nesting_message(str(file), line))


def _nesting_message(file: str, line: int | None) -> str:
    where = f"{file}:{line}" if line is not None else file
    return (
        f"{where}: a value nests arrays or tables more than {MAX_NESTING} levels deep\n"
        "    fix: flatten the value; no Nexus setting needs more than a few levels"
    )


def _tool_name_problems(config: NexusConfig) -> list[str]:
    """Plain tool names in ``[tools]`` lists that are no tool Nexus knows (a typo would silently not apply)."""
    from nexus.config._tool_names import unknown_tool_entries

    if not config.tools.strict_names:
        return []
    blocks = []
    for path, entries in config.tools.lists():
        loc: Loc = ("tools", *path)
        for problem in unknown_tool_entries(entries, mcp_servers=config.mcp.servers):
            fix = (
                "correct the name; for tools your application registers from Python, "
                "set strict_names = false in [tools]"
            )
            blocks.append(f"{config.where(*loc)}: {dotted(loc)}: {problem}\n    fix: {fix}")
    return blocks


_LOCAL_MODEL_KEYS = frozenset({"max_tokens", "prompt_profile"})
"""The ``[providers.local.models.<id>]`` keys the in-process model uses (its window is ``[local] n_ctx``)."""


def _local_model_problems(config: NexusConfig) -> list[str]:
    """``[providers.local.models.<id>]`` settings that would be accepted but have no effect."""
    declared = config.providers.get("local")
    if declared is None:
        return []
    known = [config.local.model_id]
    if config.local.model_path is None and LocalModelConfig().model_id not in known:
        known.append(LocalModelConfig().model_id)
    blocks = []
    for model_id, override in declared.models.items():
        loc: Loc = ("providers", "local", "models", model_id)
        found: list[tuple[Loc, str, str]] = []
        if model_id not in known:
            ids = ", ".join(known)
            found.append((loc, f"no local model is called {model_id!r} (known: {ids})", "use one of those ids"))
        for key in sorted(override.model_fields_set - _LOCAL_MODEL_KEYS):
            fix = "set n_ctx in [local] instead" if key == "context_window" else "remove it"
            found.append(((*loc, key), "has no effect on the in-process model", fix))
        if override.max_tokens is not None and override.max_tokens >= config.local.n_ctx:
            problem = f"must be smaller than the context window ([local] n_ctx = {config.local.n_ctx})"
            found.append(((*loc, "max_tokens"), problem, "lower it, or raise n_ctx in [local]"))
        for where_loc, problem, fix in found:
            blocks.append(f"{config.where(*where_loc)}: {dotted(where_loc)}: {problem}\n    fix: {fix}")
    return blocks


def _finish(config: NexusConfig, home: Path, source: Path | None) -> NexusConfig:
    config._home = home
    config._source = source
    if source is not None:
        config._label = str(source)
    return config


def _syntax_message(message: str, file: Path | str) -> str:
    found = re.search(r"\(at line (\d+), column (\d+)\)", message)
    where = f"{file}:{found.group(1)}" if found else str(file)
    bare = message[: found.start()].strip() if found else message
    column = f" (column {found.group(2)})" if found else ""
    return (
        f"{where}: TOML syntax error{column}: {bare}\n"
        "    fix: correct the syntax on that line (strings need quotes, tables look like [name]); "
        "see docs/configuration.md"
    )


# --------------------------------------------------------------------------- validation errors


def format_validation_errors(exc: RecordError, text: str, file: Path | str) -> str:
    """One block per error: ``file:line: dotted.key: problem`` and a ``fix:`` line."""
    lines = key_lines(text)
    blocks = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        line = line_of(lines, loc)
        where = f"{file}:{line}" if line is not None else str(file)
        problem, fix = _explain(error, loc)
        blocks.append(f"{where}: {dotted(loc) or '(top level)'}: {problem}\n    fix: {fix}")
    count = len(blocks)
    head = f"invalid config ({count} problem{'s' if count != 1 else ''}):"
    return "\n".join([head, *blocks])


def dotted(loc: Loc) -> str:
    """``('providers', 'openai', 'auth_profiles', 0, 'api_key')`` → ``providers.openai.auth_profiles[0].api_key``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else f'"{part}"'
            out += f".{text}" if out else text
    return out


def _explain(error: Mapping[str, Any], loc: Loc) -> tuple[str, str]:
    kind = error["type"]
    message = str(error["msg"])
    if kind == "extra_forbidden":
        return _unknown_key(loc)
    if kind == "missing":
        return "required key is missing", f"add `{loc[-1]} = …` to this table"
    if kind == "value_error":
        return message.removeprefix("Value error, "), "change the value as described"
    got = _describe_input(error.get("input"), loc)
    if kind.endswith("_type") or kind in ("literal_error", "enum", "bool_parsing", "int_from_float"):
        return f"{message}{got}", _type_fix(kind, message, loc)
    return f"{message}{got}", "change the value to satisfy the constraint"


def _describe_input(value: object, loc: Loc) -> str:
    kind = _TOML_TYPE.get(type(value), type(value).__name__)
    secret = any(hint in str(part).lower() for part in loc for hint in _SECRET_HINTS)
    if secret or isinstance(value, dict | list):
        return f" (got {kind})"
    shown = repr(value)
    return f" (got {kind}: {shown[:60]})"


def _type_fix(kind: str, message: str, loc: Loc) -> str:
    key = loc[-1] if loc and isinstance(loc[-1], str) else "value"
    examples = {
        "int_type": f"write a whole number without quotes, e.g. {key} = 25",
        "int_from_float": f"write a whole number without a decimal point, e.g. {key} = 25",
        "float_type": f"write a number without quotes, e.g. {key} = 1.5",
        "bool_type": f"write true or false without quotes, e.g. {key} = true",
        "string_type": f'put the value in double quotes, e.g. {key} = "…"',
        "list_type": f'write an array, e.g. {key} = ["…"]',
        "dict_type": f"make it a table: [{key}] with keys under it, or {key} = {{ … }}",
        "model_type": f"make it a table: [{dotted(loc)}] with keys under it",
    }
    if kind == "literal_error":
        return f"use one of the allowed values ({message.removeprefix('Input should be ')})"
    return examples.get(kind, "change the value to the expected type")


def _unknown_key(loc: Loc) -> tuple[str, str]:
    key = str(loc[-1])
    allowed = _allowed_keys(loc[:-1])
    if allowed is None:
        return f"unknown key {key!r}", "remove it (see docs/configuration.md for the keys)"
    import difflib  # for a suggestion in an error message only

    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    table = dotted(loc[:-1]) or "the top level"
    return f"unknown key {key!r}", f"{hint}remove or rename it; keys allowed in {table}: {', '.join(allowed)}"


def _allowed_keys(loc: Loc) -> list[str] | None:
    annotation: Any = NexusConfig
    parts = list(loc)
    while True:
        annotation = _unwrap_optional(annotation)
        origin = typing.get_origin(annotation)
        if origin in (dict, list):
            if not parts:
                return None
            parts.pop(0)
            annotation = typing.get_args(annotation)[-1]
            continue
        if isinstance(annotation, type) and issubclass(annotation, Record):
            if not parts:
                return list(annotation.record_fields())
            field = annotation.record_fields().get(str(parts.pop(0)))
            if field is None:
                return None
            annotation = field.annotation
            continue
        return None


def _unwrap_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation
