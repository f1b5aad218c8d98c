"""The ``specplug`` command line: built-in commands plus those that plugins add."""

from __future__ import annotations

import sys
import warnings
from typing import Any

__all__ = ["INTERRUPTED", "build_app", "main"]

#: the exit status of a run stopped by Ctrl-C (SIGINT): the shell's 128 + 2
INTERRUPTED = 130


def build_app() -> Any:
    """The root Typer app (:func:`specplug.cli._app.build_app`), imported when first asked for."""
    from specplug.cli._app import build_app as build

    return build()


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001 - showwarning's signature
    print(f"specplug: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; user mistakes end with a one-line error and exit code 2, no traceback.

    Warnings (a broken plugin left out) are one line each, ``specplug: warning: ...``. Ctrl-C,
    at start-up too (the app and its commands import here), ends with ``specplug: interrupted``
    and exit status :data:`INTERRUPTED`.
    """
    try:
        _run(argv)
    except KeyboardInterrupt:
        print("specplug: interrupted", file=sys.stderr)
        raise SystemExit(INTERRUPTED) from None


def _run(argv: list[str] | None) -> None:
    import typer

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
        except typer.Abort as error:
            if isinstance(error.__cause__, KeyboardInterrupt):  # click turns Ctrl-C into Abort
                raise KeyboardInterrupt from None
            typer.echo("specplug: aborted", err=True)
            raise SystemExit(1) from None
        except typer.TyperException as error:  # click's UsageError and kin, in typer's copy of click
            message = error.format_message() if hasattr(error, "format_message") else str(error)
            if message:  # empty: no arguments, and the help was shown
                context = getattr(error, "ctx", None)
                where = f" (see {context.command_path} --help)" if context is not None else ""
                typer.echo(f"specplug: error: {_one_line(message)}{where}", err=True)
            raise SystemExit(getattr(error, "exit_code", 2)) from None
    if code == INTERRUPTED:  # typer turns Ctrl-C inside a command into this status, silently
        raise KeyboardInterrupt
    raise SystemExit(code if isinstance(code, int) else 0)


def _one_line(text: str) -> str:
    # messages may quote a user's file or value; the promise is one line on stderr
    return " ".join(text.split("\n")) if "\n" in text else text
