"""The ``specplug`` command line: built-in commands plus those that plugins add."""

from __future__ import annotations

import sys

import typer

from specplug.cli._app import build_app

__all__ = ["build_app", "main"]


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; user mistakes end with a one-line error and exit code 2, no traceback."""
    from specplug._errors import SpecplugError

    try:
        app = build_app()
        app(args=argv if argv is not None else sys.argv[1:], prog_name="specplug", standalone_mode=True)
    except SpecplugError as error:
        typer.echo(f"specplug: error: {error}", err=True)
        raise SystemExit(2) from None
