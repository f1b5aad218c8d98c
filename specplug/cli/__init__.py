"""The ``specplug`` command line: built-in commands plus those that plugins add."""

from __future__ import annotations

import sys
import warnings

import typer

from specplug.cli._app import build_app

__all__ = ["build_app", "main"]


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001 - showwarning's signature
    typer.echo(f"specplug: warning: {message}", err=True)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; user mistakes end with a one-line error and exit code 2, no traceback.

    Warnings (a broken plugin left out) are one line each, ``specplug: warning: ...``.
    """
    from specplug._errors import SpecplugError

    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning
        try:
            app = build_app()
            # not standalone: click's usage errors come here, to be told in one line like ours
            code = app(args=argv if argv is not None else sys.argv[1:], prog_name="specplug", standalone_mode=False)
        except SpecplugError as error:
            typer.echo(f"specplug: error: {_one_line(str(error))}", err=True)
            raise SystemExit(2) from None
        except typer.Abort:
            typer.echo("specplug: aborted", err=True)
            raise SystemExit(1) from None
        except typer.TyperException as error:  # click's UsageError and kin, in typer's copy of click
            message = error.format_message() if hasattr(error, "format_message") else str(error)
            if message:  # empty: no arguments, and the help was shown
                context = getattr(error, "ctx", None)
                where = f" (see {context.command_path} --help)" if context is not None else ""
                typer.echo(f"specplug: error: {_one_line(message)}{where}", err=True)
            raise SystemExit(getattr(error, "exit_code", 2)) from None
    raise SystemExit(code if isinstance(code, int) else 0)


def _one_line(text: str) -> str:
    # messages may quote a user's file or value; the promise is one line on stderr
    return " ".join(text.split("\n")) if "\n" in text else text
