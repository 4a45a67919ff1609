"""Each option is declared once: a field of its command's class in commands/options.py, which
typer reads as the command's parameters (issue 27 item 5)."""

from __future__ import annotations

import ast
import dataclasses
import inspect

import pytest
from typer.testing import CliRunner

from dflash_doctor import cli
from dflash_doctor.commands import options
from dflash_doctor.defaults import Severity
from tests.conftest import REPO

COMMANDS = {
    "check": options.CheckArgs,
    "probe": options.ProbeArgs,
    "gate": options.GateArgs,
    "fix": options.FixArgs,
    "bench_command": options.BenchArgs,
}


def test_each_command_takes_exactly_its_options_fields_in_order() -> None:
    callbacks = {c.callback.__name__: c.callback for c in cli.app.registered_commands if c.callback}
    for name, args in COMMANDS.items():
        parameters = inspect.signature(callbacks[name]).parameters
        assert list(parameters) == [f.name for f in dataclasses.fields(args)], name


def test_cli_py_declares_no_option_of_a_command() -> None:
    # The only typer.Option in cli.py is the app's own --version; every command's options
    # live in commands/options.py.
    tree = ast.parse((REPO / "dflash_doctor" / "cli.py").read_text(encoding="utf-8"))
    declared = [
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("Option", "Argument")
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ]
    assert declared == ["--version"]


def test_a_command_body_receives_one_frozen_value() -> None:
    seen: list[options.GateArgs] = []

    def body(args: options.GateArgs) -> None:
        seen.append(args)

    registered = len(cli.app.registered_commands)
    cli._command(options.GateArgs, "gate-probe")(body)
    try:
        result = CliRunner().invoke(
            cli.app, ["gate-probe", "a.sh", "b.sh", "--labels", "x", "--fail-on", "warning"]
        )
    finally:
        del cli.app.registered_commands[registered:]
    assert result.exit_code == 0, result.output
    (args,) = seen
    assert args.launch == ["a.sh", "b.sh"] and args.labels == "x"
    assert args.fail_on is Severity.WARNING and args.fmt is options.ReportFormat.text
    with pytest.raises(dataclasses.FrozenInstanceError):
        args.labels = "y"  # type: ignore[misc]
