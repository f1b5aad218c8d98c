"""Comma-separated option values (``--batch-sizes 1,8,32``, ``--workloads code-edit,text``), read one way.

Every command reads its list options here, so a bad value reads the same everywhere: the
option, what was given, and what is valid.
"""

from __future__ import annotations

from collections.abc import Collection

from specplug._errors import InvalidOptionError

__all__ = ["comma_ints", "comma_names"]


def _items(text: str) -> list[str]:
    # blanks around commas and empty items ("1,,8", "1, 8,") are forgiven
    return [part.strip() for part in text.split(",") if part.strip()]


def comma_names(option: str, text: str, *, valid: Collection[str] | None = None, allow_empty: bool = False) -> list[str]:
    """The names in ``text``, each one of ``valid`` when given; none only with ``allow_empty``.

    >>> comma_names("--workloads", " code-edit, text ", valid=("code-edit", "text"))
    ['code-edit', 'text']
    >>> comma_names("--workloads", "poetry", valid=("code-edit", "text"))
    Traceback (most recent call last):
    ...
    specplug._errors.InvalidOptionError: --workloads 'poetry': unknown ['poetry']; valid: code-edit, text
    """
    names = _items(text)
    if valid is not None:
        unknown = [name for name in names if name not in valid]
        if unknown:
            raise InvalidOptionError(f"{option} {text!r}: unknown {unknown}; valid: {', '.join(valid)}")
    if not names and not allow_empty:
        hint = f"; valid: {', '.join(valid)}" if valid is not None else ""
        raise InvalidOptionError(f"{option} {text!r}: give at least one name, comma-separated{hint}")
    return names


def _shown(text: str) -> str:
    # a pasted 5000-digit number must not fill the terminal: the message shows its start
    return repr(text) if len(text) <= 40 else repr(text[:40]) + f"... ({len(text)} characters)"


def comma_ints(option: str, text: str, *, example: str, sizes: bool = False, maximum: int = 1 << 20) -> list[int]:
    """The ints in ``1..maximum`` in ``text``; with ``sizes``, ``8k`` is accepted for 8192 (token counts).

    >>> comma_ints("--contexts", "256,8k", example="8k,64k", sizes=True)
    [256, 8192]
    >>> comma_ints("--batch-sizes", "1,0", example="1,8,32")
    Traceback (most recent call last):
    ...
    specplug._errors.InvalidOptionError: --batch-sizes '1,0': give ints from 1 to 1048576, such as 1,8,32
    """
    values = []
    for part in _items(text):
        scale = 1024 if sizes and part.lower().endswith("k") else 1
        digits = part[:-1] if scale > 1 else part
        if not digits.isdigit() or len(digits) > 18:  # isdigit: no sign, no blanks; 18 digits: no huge ints
            kind = "sizes (8k = 8192)" if sizes else "ints"
            raise InvalidOptionError(
                f"{option} {_shown(text)} is not a comma-separated list of {kind}: {_shown(part)} is not one; e.g. {example}"
            )
        values.append(int(digits) * scale)
    if not values or min(values) < 1 or max(values) > maximum:
        raise InvalidOptionError(f"{option} {_shown(text)}: give ints from 1 to {maximum}, such as {example}")
    return values
