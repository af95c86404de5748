"""The parser is built only as far as the command line needs it, and says exactly what the full one says."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nexus.cli._help import terminal_width, top_help
from nexus.cli._parser import COMMANDS, build_parser
from nexus.cli._run_line import read_run_line

SRC = Path(__file__).resolve().parents[2] / "src"


def _help(parser: argparse.ArgumentParser, *path: str) -> str:
    for name in path:
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = actions[0].choices[name]
    return parser.format_help()


@pytest.fixture(autouse=True)
def _fixed_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")


def test_top_level_help_lists_every_command_without_building_them() -> None:
    lazy, full = build_parser(["--help"]), build_parser()
    assert _help(lazy) == _help(full)
    subparsers = next(a for a in lazy._actions if isinstance(a, argparse._SubParsersAction))
    assert list(subparsers.choices) == list(COMMANDS)
    assert all(len(sub._actions) == 1 for sub in subparsers.choices.values())  # only -h: options not built


@pytest.mark.parametrize(
    ("argv", "command"),
    [(["run", "sessions"], "run"), (["--config", "chat", "sessions", "list"], "sessions"), (["doctor"], "doctor")],
)
def test_a_command_line_that_runs_a_command_builds_that_command_alone(argv: list[str], command: str) -> None:
    subparsers = next(a for a in build_parser(argv)._actions if isinstance(a, argparse._SubParsersAction))
    assert list(subparsers.choices) == [command]  # argparse hands the line to it and looks at no other


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_named_command_is_complete(command: str) -> None:
    assert _help(build_parser([command, "--help"]), command) == _help(build_parser(), command)


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "-s", "x", "--json", "hello"],
        ["--config", "run", "run", "hi"],  # a command name as an option's value
        ["chat", "--agent", "lead"],
        ["sessions", "fork", "01ABC", "--label", "b"],
        ["send", "coder", "fix it", "--wait", "--timeout", "5"],
        ["agents", "add", "coder", "--role", "worker"],
        ["queue", "list", "--all"],
        ["adapters", "test", "tg/main", "--to", "chat:1", "hi"],
        ["serve", "--port", "0"],
        ["models", "--json"],
        ["doctor"],
    ],
)
def test_parsing_is_the_same_as_with_the_full_parser(argv: list[str]) -> None:
    assert build_parser(argv).parse_args(argv) == build_parser().parse_args(argv)


def test_an_unknown_command_is_refused_with_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser(["bogus"]).parse_args(["bogus"])
    assert exit_.value.code == 2
    assert "invalid choice: 'bogus' (choose from 'run', 'chat'," in capsys.readouterr().err


def test_the_help_printed_without_argparse_is_argparse_s(monkeypatch: pytest.MonkeyPatch) -> None:
    fitted = []
    for columns in range(20, 251):
        monkeypatch.setenv("COLUMNS", str(columns))
        fast = top_help(terminal_width())
        if fast is not None:
            assert fast == build_parser(["--help"]).format_help(), f"at {columns} columns"
            fitted.append(columns)
    assert fitted[0] <= 80 and fitted[-1] == 250  # every width from a standard terminal up is printed without argparse


@pytest.mark.parametrize("columns", ["", "0", "abc", "1", "100"])
def test_the_help_width_is_shutil_s(monkeypatch: pytest.MonkeyPatch, columns: str) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    assert terminal_width() == shutil.get_terminal_size().columns - 2


def test_nexus_help_imports_no_argparse() -> None:
    code = "import sys\nfrom nexus.cli import main\nassert main(['--help']) == 0\nprint('argparse' in sys.modules)\n"
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.startswith("usage: nexus [-h]") and done.stdout.rstrip().endswith("False")


PLAIN_RUN_LINES = [
    ["run", "hello"],
    ["run", "-"],
    ["run", "-s", "bugfix", "--json", "fix the failing test"],
    ["run", "hello there", "-m", "openai/gpt-4o-mini", "--thinking", "high", "--session", "x"],
    ["run", "--model", "a/b", "--json", "sessions"],
]
ARGPARSE_RUN_LINES = [
    ["run"],  # no message: argparse says so
    ["run", "--help"],
    ["run", "-h", "x"],
    ["run", "--session=x", "hi"],
    ["run", "-sx", "hi"],
    ["run", "--sess", "x", "hi"],  # an abbreviation
    ["run", "-s", "a", "-s", "b", "hi"],
    ["run", "--json", "--json", "hi"],
    ["run", "-s", "-x", "hi"],
    ["run", "-s"],
    ["run", "--", "-hi"],
    ["run", "-1"],
    ["run", "a", "b"],
    ["run", "--thinking", "huge", "hi"],
    ["run", "-s", "caf\udce9", "hi"],  # not UTF-8: argparse refuses the label
    ["--config", "f.toml", "run", "hi"],
    ["chat"],
]


@pytest.mark.parametrize("argv", PLAIN_RUN_LINES)
def test_a_plain_run_line_is_read_without_argparse_as_argparse_reads_it(argv: list[str]) -> None:
    quick = read_run_line(argv)
    assert quick is not None
    assert vars(quick) == vars(build_parser(argv).parse_args(argv))


@pytest.mark.parametrize("argv", ARGPARSE_RUN_LINES)
def test_any_other_line_is_left_to_argparse(argv: list[str]) -> None:
    assert read_run_line(argv) is None
