"""Presets: flag bundles and config snippets shipped in each engine's own format.

They live in the ``specplug_presets`` package (the repository's top-level ``presets/``) as
``presets/<engine>/<name>.<ext>``: ``llama-server/code-edit.ini``, ``vllm/ngram.json``, ...
A preset's summary is its first comment line (``#`` or ``;``), or for JSON a top-level
``"description"`` string. INI presets (llama-server's ``--models-preset`` format: one
section named after the preset, keyed by long flag names) also render as a flag list.

>>> preset = load_preset("llama-server", "code-edit")
>>> preset.formats
('ini', 'flags')
>>> preset.render("flags").startswith("--spec-")
True
"""

from __future__ import annotations

import configparser
import json
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

from specplug._errors import NotFoundError, SpecplugError

__all__ = ["Preset", "PresetError", "UnknownPresetError", "engines", "list_presets", "load_preset"]

PRESETS_PACKAGE = "specplug_presets"
#: file types that hold presets; other files in an engine folder (README, prompts) are not presets
PRESET_SUFFIXES = (".ini", ".json", ".yaml", ".yml", ".toml")
_TRUE = {"true", "on", "yes", "1"}
_FALSE = {"false", "off", "no", "0"}


class UnknownPresetError(NotFoundError):
    """An engine or preset name that is not shipped."""


class PresetError(SpecplugError, ValueError):
    """A preset file that cannot be read, or a format it cannot be rendered in."""


@dataclass(frozen=True)
class Preset:
    """One preset: which engine, its name, its summary and the file's text."""

    engine: str
    name: str
    filename: str
    text: str
    summary: str

    @property
    def suffix(self) -> str:
        return self.filename.rsplit(".", 1)[-1]

    @property
    def formats(self) -> tuple[str, ...]:
        """The formats :meth:`render` accepts; the first is the file's own."""
        return ("ini", "flags") if self.suffix == "ini" else (self.suffix,)

    def options(self) -> dict[str, str]:
        """An INI preset's options (long flag names without dashes -> values), in file order."""
        section = _ini_section(self)
        return dict(section.items())

    def flags(self) -> list[str]:
        """An INI preset as command-line arguments: ``["--spec-type", "ngram-mod", ...]``."""
        args: list[str] = []
        for key, value in self.options().items():
            flag = key if key.startswith("-") else f"--{key}"
            if value.lower() in _TRUE:
                args.append(flag)  # a switch such as --metrics, written `metrics = true`
            elif value.lower() not in _FALSE:
                args += [flag, value]
        return args

    def render(self, fmt: str | None = None) -> str:
        """The preset as text in ``fmt`` (default: the file's own format)."""
        fmt = fmt or self.formats[0]
        if fmt not in self.formats:
            raise PresetError(
                f"preset {self.engine}/{self.name} cannot be shown as {fmt!r}; valid formats: {', '.join(self.formats)}"
            )
        if fmt == "flags":
            return " ".join(_quote(arg) for arg in self.flags())
        return self.text.rstrip("\n")


def _quote(arg: str) -> str:
    return arg if arg and all(c.isalnum() or c in "-_.,/:=+" for c in arg) else json.dumps(arg)


def _ini_section(preset: Preset) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, comment_prefixes=("#", ";"), inline_comment_prefixes=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # flag names are case-sensitive
    try:
        parser.read_string(preset.text, source=preset.filename)
    except configparser.Error as error:
        raise PresetError(f"preset file {preset.engine}/{preset.filename} is not valid INI: {error}") from None
    if preset.name not in parser:
        raise PresetError(
            f"preset file {preset.engine}/{preset.filename} has no [{preset.name}] section "
            f"(sections: {', '.join(parser.sections()) or 'none'})"
        )
    return parser[preset.name]


def _summary(filename: str, text: str) -> str:
    if filename.endswith(".json"):
        try:
            data = json.loads(text)
        except ValueError:
            return ""
        description = data.get("description") if isinstance(data, dict) else None
        return description.strip() if isinstance(description, str) else ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("#", ";")):
            return stripped.lstrip("#; ").strip()
        if stripped:
            break
    return ""


def _root() -> Traversable:
    return resources.files(PRESETS_PACKAGE)


def engines() -> list[str]:
    """The engines that ship presets, sorted."""
    return sorted(
        entry.name
        for entry in _root().iterdir()
        if entry.is_dir() and not entry.name.startswith(("_", ".")) and _preset_files(entry)
    )


def _preset_files(folder: Traversable) -> list[Traversable]:
    return sorted(
        (entry for entry in folder.iterdir() if entry.is_file() and entry.name.endswith(PRESET_SUFFIXES)),
        key=lambda entry: entry.name,
    )


def _load(engine: str, entry: Traversable) -> Preset:
    text = entry.read_text(encoding="utf-8")
    name = entry.name.rsplit(".", 1)[0]
    return Preset(engine, name, entry.name, text, _summary(entry.name, text))


def list_presets(engine: str | None = None) -> list[Preset]:
    """All presets of ``engine`` (or of every engine), sorted by engine and name."""
    names = [engine] if engine is not None else engines()
    if engine is not None:
        _check_engine(engine)
    return [_load(name, entry) for name in names for entry in _preset_files(_root() / name)]


def _check_engine(engine: str) -> None:
    valid = engines()
    if engine not in valid:
        raise UnknownPresetError(f"no presets for engine {engine!r}; engines with presets: {', '.join(valid) or '(none)'}")


def load_preset(engine: str, name: str) -> Preset:
    """The preset ``name`` of ``engine``; an unknown name is an error listing the valid ones."""
    presets = {preset.name: preset for preset in list_presets(engine)}
    if name not in presets:
        raise UnknownPresetError(
            f"no preset {name!r} for {engine}; valid presets: {', '.join(sorted(presets)) or '(none)'}"
        )
    return presets[name]
