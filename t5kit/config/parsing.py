"""Flags: YAML configs (with `_include`) merged left to right, then command-line overrides, then dataclasses.

    python pre_train_t5.py configs/quickstart.yaml --learning_rate 3e-4 --max_steps=200
    python pre_train_t5.py runs/quickstart/config.yaml          # the resolved flags of an earlier run

A config names the data folder as `${T5_DATA_DIR}` (`data_dir: ${T5_DATA_DIR}/glue/RTE`): expanded from the environment
variable, ../shared/data where it is unset (expand_data_dir).

The dataclasses every entry script shares live in `arguments.py`; this module parses and validates them.
"""
import argparse
import dataclasses
import enum
import os
import re
import types
import typing
from pathlib import Path

import yaml
from transformers import HfArgumentParser

from t5kit.config.mapping_file import read_mapping
from t5kit.errors import UsageError, did_you_mean, unknown_name_message

INCLUDE_KEY = "_include"
CONFIG_SUFFIXES = (".yaml", ".yml")
MAX_LISTED_CHOICES = 12  # longer choice lists are left to --help
# Never written to config.yaml: set by the launcher for each process, or a secret.
UNSAVED_KEYS = ("local_rank", "hub_token")
# config.yaml's section of values derived from the flags (outputs/run_record.py); loading a config ignores it.
DERIVED_KEY = "derived"
DATA_DIR_VARIABLE = "T5_DATA_DIR"  # the one environment variable a config file may name
DEFAULT_DATA_DIR = "../shared/data"  # where it is unset: the folder beside the repository
PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")


def deep_merge(base, override):
    """Returns base updated by override; nested mappings merge key by key, every other value is replaced."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            value = deep_merge(merged[key], value)
        merged[key] = value
    return merged


def expand_data_dir(shown, content):
    """`${T5_DATA_DIR}` in a config file's string values and in the string items of its list values becomes the
    variable's value ($T5_DATA_DIR; ../shared/data where it is unset or empty), so one variable points every config
    at the data folder (a list flag takes `data_dir: ${T5_DATA_DIR}/glue/RTE` as one item; inside `[...]` YAML needs
    it quoted). Nothing else is expanded (mappings, $T5_DATA_DIR without braces); any other `${...}` is refused,
    naming the file and the key."""
    data_dir = os.environ.get(DATA_DIR_VARIABLE) or DEFAULT_DATA_DIR

    def expand(key, value):
        if not isinstance(value, str):
            return value
        for name in PLACEHOLDER.findall(value):
            if name != DATA_DIR_VARIABLE:
                raise UsageError(f"{shown}: {key}: ${{{name}}} is not expanded; a config file may name only "
                                 f"${{{DATA_DIR_VARIABLE}}} (the data folder, {DEFAULT_DATA_DIR} where it is unset)")
        return value.replace(f"${{{DATA_DIR_VARIABLE}}}", data_dir)

    return {key: [expand(key, item) for item in value] if isinstance(value, list) else expand(key, value)
            for key, value in content.items()}


def load_yaml_config(path, _including=(), check=None):
    """Reads one YAML config, merging its `_include` files (relative to it) first; refuses cycles.

    check(file, content), if given, vets and converts each file's own keys before the merge, so an error names the
    file (an included one included) that holds the bad value."""
    shown, path = str(path), Path(path).resolve()
    if path in _including:
        chain = " -> ".join(p.name for p in (*_including, path))
        raise UsageError(f"_include cycle in config files: {chain}; remove one of these includes")
    content = read_mapping(path, "config file", "flag: value",
                           missing_hint="check the path (includes are relative to the including file)")
    includes = _include_names(shown, content.pop(INCLUDE_KEY, []))
    content = expand_data_dir(shown, content)
    if check is not None:
        content = check(shown, content)
    merged = {}
    for include in includes:
        merged = deep_merge(merged, load_yaml_config(path.parent / include, (*_including, path), check))
    return deep_merge(merged, content)


def _include_names(shown, includes):
    """`_include: base.yaml` or `_include: [a.yaml, b.yaml]`; anything else would fail later, far from the file."""
    includes = [includes] if isinstance(includes, str) else includes
    if not isinstance(includes, list) or not all(isinstance(name, str) for name in includes):
        raise UsageError(f"{shown}: {INCLUDE_KEY}: expected a config file name or a list of them, "
                         f"got {_shown_value(includes)}")
    return includes


def invalid_choice_message(flag, value, choices):
    """'--flag=value is not a valid choice; did you mean ...? choices: ...' (long lists point to --help)."""
    shown = value.value if isinstance(value, enum.Enum) else value
    listed = [getattr(choice, "value", choice) for choice in choices]
    return f"--{flag}={shown!r} is not a valid choice{did_you_mean(shown, listed, len(listed) <= MAX_LISTED_CHOICES)}"


def check_choices(instance):
    """Refuses a value outside its field's declared choices (a dataclass built in code, not through the parser)."""
    for f in dataclasses.fields(instance):
        choices = f.metadata.get("choices")
        value = getattr(instance, f.name)
        if choices and value is not None and value not in choices:
            raise UsageError(invalid_choice_message(f.name, value, choices))


def split_argv(argv):
    """Splits argv into leading config files and the `--flag value` overrides that follow them."""
    argv = list(argv)
    first_flag = next((i for i, token in enumerate(argv) if token.startswith("-")), len(argv))
    config_files, overrides = argv[:first_flag], argv[first_flag:]
    for name in config_files:
        if not name.endswith(CONFIG_SUFFIXES):
            raise UsageError(f"positional argument {name!r} is not a YAML config (.yaml/.yml); flags need a leading --")
    return config_files, overrides


class _Parser(HfArgumentParser):
    """HfArgumentParser that raises UsageError instead of printing usage, and never guesses abbreviations."""

    def __init__(self, dataclass_types):
        super().__init__(dataclass_types, allow_abbrev=False)

    def error(self, message):
        raise UsageError(message)

    def _check_value(self, action, value):
        # argparse's own check, with our wording: the same line as a YAML value or a dataclass built in code gets.
        if action.choices is not None and value not in action.choices:
            raise UsageError(invalid_choice_message(action.dest, value, action.choices))


def _parser_actions(parser):
    """dest -> action; for a bool flag the typed `--x` action, not the `--no_x` one HfArgumentParser adds after it."""
    actions = {}
    for action in parser._actions:
        if action.dest != "help":
            actions.setdefault(action.dest, action)
    return actions


def _field_types(dataclass_types):
    """name -> (type annotation, default) of every init field; HfArgumentParser drops what YAML needs to know
    (a field that also takes a dict or a list, or None)."""
    fields = {}
    for dtype in dataclass_types:
        try:
            hints = typing.get_type_hints(dtype)
        except (NameError, TypeError):  # an annotation naming what is not importable here: use the raw annotations
            hints = {}
        for f in dataclasses.fields(dtype):
            if f.init:
                fields[f.name] = (hints.get(f.name, f.type), f.default)
    return fields


def _type_options(annotation):
    """The alternatives of a Union (`X | None`, `Optional[X]`), or the annotation alone."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def _is_kind(option, kind):
    return option is kind or typing.get_origin(option) is kind


def _shown_value(value):
    """A value as YAML spells it where that differs from Python (null, true/false)."""
    if value is None or isinstance(value, bool):
        return yaml.safe_dump(value).splitlines()[0]
    return repr(value)


def _expected(action, takes_list, takes_dict):
    """What a key accepts, in words, for the error message."""
    if action.choices:
        expected = "one of " + ", ".join(repr(str(c)) for c in action.choices)
    else:
        name = getattr(action.type, "__name__", "str")
        expected = {"int": "an integer", "float": "a number", "str": "a string", "string_to_bool": "true or false"
                    }.get(name, f"a {name} value")
    if takes_list:
        expected += ", or a list of them"
    return f"a mapping or {expected}" if takes_dict else expected


def _convert_scalar(action, value):
    """Converts one YAML scalar exactly as argparse converts its command-line text (type, then choices)."""
    converted = action.type(str(value)) if action.type is not None else str(value)
    if action.choices is not None and converted not in action.choices:
        raise ValueError(converted)
    return converted


def _takes(action, field_type):
    """(list, mapping, null): what else a key takes besides one value of its flag's type. HfArgumentParser keeps
    none of it for a field typed `dict | str | None` or `str | list[str] | None`, so it comes from the annotation."""
    annotation, default = field_type
    options = _type_options(annotation)
    takes_list = action.nargs in ("+", "*") or any(_is_kind(option, list) for option in options)
    return takes_list, any(_is_kind(option, dict) for option in options), type(None) in options or default is None


def _takes_list_of_mappings(field_type):
    """Whether the field's type has `list[dict]` (--denoisers): its dataclass checks each mapping."""
    return any(_is_kind(option, list) and typing.get_args(option)[:1] == (dict,)
               for option in _type_options(field_type[0]))


def _yaml_value(where, action, field_type, value):
    """A YAML value converted for the parser, or UsageError naming `where` (file: key) and what the key takes.

    Scalars go through the flag's own argparse type, so YAML and the command line accept the same values (3e-4,
    an int for a float, yes/no for a bool). Lists are taken where the flag takes several values (a scalar becomes
    a one-item list), mappings only where the field's type has dict, null only where the field can be None."""
    takes_list, takes_dict, takes_none = _takes(action, field_type)
    if type(value) is type(action.default) and value == action.default:
        return value  # the flag's own default, as config.yaml records it: `debug: null` though no --debug gives None
    if (value is None and takes_none) or (isinstance(value, dict) and takes_dict):
        return value
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value) \
            and _takes_list_of_mappings(field_type):
        return value
    items = value if isinstance(value, list) else [value] if action.nargs in ("+", "*") else None
    try:
        if items is not None and takes_list and not any(isinstance(v, (list, dict, type(None))) for v in items):
            return [_convert_scalar(action, v) for v in items]
        if not isinstance(value, (list, dict, type(None))):
            return _convert_scalar(action, value)
    except (ValueError, TypeError, argparse.ArgumentTypeError):
        pass
    raise UsageError(f"{where}: expected {_expected(action, takes_list, takes_dict)}, got {_shown_value(value)}")


def load_config_files(parser, config_files):
    """Merges the YAML files left to right; refuses keys no dataclass declares and values of the wrong type,
    naming the file, before anything runs."""
    actions, fields = _parser_actions(parser), _field_types(parser.dataclass_types)

    def check(config_file, config):
        config.pop(DERIVED_KEY, None)  # a run record's derived values (outputs/run_record.py) are not flags
        for key in config:
            if key not in actions:
                raise UsageError(unknown_name_message("key", key, config_file, actions))
        return {key: _yaml_value(f"{config_file}: {key}", actions[key], fields[key], value)
                for key, value in config.items()}

    merged = {}
    for config_file in config_files:
        merged = deep_merge(merged, load_yaml_config(config_file, check=check))
    return merged


def _check_overrides(parser, remaining):
    """Refuses command-line flags no dataclass declares, suggesting the closest names."""
    if not remaining:
        return
    unknown = next((token for token in remaining if token.startswith("--")), remaining[0])
    name = "--" + unknown.lstrip("-").split("=")[0]
    known = ["--" + dest for dest in _parser_actions(parser)]
    raise UsageError(unknown_name_message("flag", name, "the command line", known))


def _build_dataclasses(dataclass_types, namespace):
    """Instantiates each dataclass from the parsed namespace. Their __post_init__ checks raise UsageError for bad
    input; any other exception is a bug of ours and keeps its traceback."""
    values = vars(namespace)
    return tuple(dtype(**{f.name: values[f.name] for f in dataclasses.fields(dtype) if f.init and f.name in values})
                 for dtype in dataclass_types)


class Program(tuple):
    """An entry script's flag dataclasses (the tuple itself, in parsing order) and its `cross_checks`: functions
    called with every parsed group, in the same order, that raise UsageError."""

    def __new__(cls, flag_classes, cross_checks=()):
        program = super().__new__(cls, flag_classes)
        program.cross_checks = tuple(cross_checks)
        return program


def parse_flags(dataclass_types, argv):
    """Parses `[CONFIG.yaml ...] [--flag value ...]` into a tuple of the dataclasses.

    Order: YAML files merged left to right (each with its includes), then command-line flags, then each
    dataclass's __post_init__ validation, then the checks that read several groups (an entry script's Program
    lists them as `cross_checks`). Any bad input raises UsageError with a one-line message.
    """
    parser = _Parser(dataclass_types)
    config_files, overrides = split_argv(argv)
    # Config values, already converted, become the parser's defaults, so command-line flags parsed next win.
    parser.set_defaults(**load_config_files(parser, config_files))
    namespace, remaining = parser.parse_known_args(overrides)
    _check_overrides(parser, remaining)
    flags = _build_dataclasses(dataclass_types, namespace)
    for check in getattr(dataclass_types, "cross_checks", ()):
        check(*flags)
    return flags
