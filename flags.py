"""Flags: YAML configs (with `_include`) merged left to right, then command-line overrides, then dataclasses.

    python pre_train_t5.py configs/quickstart.yaml --learning_rate 3e-4 --max_steps=200
    python pre_train_t5.py runs/quickstart/config.yaml          # the resolved flags of an earlier run

The dataclasses every entry script shares live in `run_flags.py`; this module parses and validates them, and
`run_cli` runs an entry script's main() the way its `__main__` needs (usage errors, a clean distributed exit).
"""
import argparse
import atexit
import dataclasses
import difflib
import enum
import os
import sys
import threading
import types
import typing
from pathlib import Path

import yaml
from transformers import HfArgumentParser

INCLUDE_KEY = "_include"
CONFIG_SUFFIXES = (".yaml", ".yml")
# Never written to config.yaml: set by the launcher for each process, or a secret.
UNSAVED_KEYS = ("local_rank", "hub_token")


class UsageError(Exception):
    """Bad input from the user. Entry scripts print it as one `error: ...` line and exit with code 2."""


def closest_names(name, choices, n=3):
    """Up to n valid names closest to a misspelt one, for "did you mean" hints."""
    return difflib.get_close_matches(name, list(choices), n=n, cutoff=0.6)


def unknown_name_message(kind, name, where, choices):
    """One-line message for an unknown key/flag with the closest valid names suggested."""
    close = closest_names(name, choices)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else "; see --help for valid names"
    return f"unknown {kind} {name!r} in {where}{hint}"


def deep_merge(base, override):
    """Returns base updated by override; nested mappings merge key by key, every other value is replaced."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            value = deep_merge(merged[key], value)
        merged[key] = value
    return merged


def load_yaml_config(path, _including=(), check=None):
    """Reads one YAML config, merging its `_include` files (relative to it) first; refuses cycles.

    check(file, content), if given, vets and converts each file's own keys before the merge, so an error names the
    file (an included one included) that holds the bad value."""
    shown, path = str(path), Path(path).resolve()
    if path in _including:
        chain = " -> ".join(p.name for p in (*_including, path))
        raise UsageError(f"_include cycle in config files: {chain}; remove one of these includes")
    if not path.is_file():
        raise UsageError(f"config file {path} not found; check the path (includes are relative to the including file)")
    try:
        content = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise UsageError(f"config file {path} is not valid YAML: {str(err).splitlines()[0]}") from None
    if content is None:
        content = {}
    if not isinstance(content, dict):
        raise UsageError(f"config file {path} must be a mapping of flag: value, got a {type(content).__name__}")
    includes = _include_names(shown, content.pop(INCLUDE_KEY, []))
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
    """Instantiates each dataclass from the parsed namespace; their __post_init__ checks turn into UsageError."""
    values = vars(namespace)
    instances = []
    for dtype in dataclass_types:
        kwargs = {f.name: values[f.name] for f in dataclasses.fields(dtype) if f.init and f.name in values}
        try:
            instances.append(dtype(**kwargs))
        except UsageError:
            raise
        except (ValueError, TypeError) as err:
            raise UsageError(str(err).strip().splitlines()[0]) from None
    return tuple(instances)


def _plain(value):
    """A YAML-safe copy of a flag value (enums become their string value)."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def resolved_flags(namespace):
    """Every flag with its final value, in parser order: what config.yaml records."""
    return {key: _plain(value) for key, value in vars(namespace).items() if key not in UNSAVED_KEYS}


def parse_flags(dataclass_types, argv):
    """Parses `[CONFIG.yaml ...] [--flag value ...]` into the dataclasses, plus the resolved flags dict.

    Order: YAML files merged left to right (each with its includes), then command-line flags, then each
    dataclass's __post_init__ validation. Any bad input raises UsageError with a one-line message.
    """
    parser = _Parser(dataclass_types)
    config_files, overrides = split_argv(argv)
    # Config values, already converted, become the parser's defaults, so command-line flags parsed next win.
    parser.set_defaults(**load_config_files(parser, config_files))
    namespace, remaining = parser.parse_known_args(overrides)
    _check_overrides(parser, remaining)
    return _build_dataclasses(dataclass_types, namespace), resolved_flags(namespace)


def run_cli(main):
    """Runs an entry script's main() for `__main__`: a UsageError becomes one `error:` line and exit code 2; a run
    that finished, or stopped cleanly for pre-emption (SystemExit 0, signals.py), leaves its process group. A
    process that was in a group then ends without the interpreter's teardown (exit_before_teardown)."""
    try:
        main()
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        if in_process_group():  # refused after the launcher's group was formed: the group is not left (see below)
            exit_before_teardown(2)
        sys.exit(2)
    except SystemExit as stop:
        if stop.code not in (0, None):
            raise
    if in_process_group():
        leave_process_group()
        exit_before_teardown(0)


def in_process_group():
    """Whether this process is in a torch.distributed group; imports no torch if nothing has (flag parsing)."""
    distributed = sys.modules.get("torch.distributed")
    return bool(distributed and distributed.is_available() and distributed.is_initialized())


def leave_process_group():
    """Destroys the distributed process group. Only after success: a rank leaving while another is still inside a
    collective could hang it."""
    import torch.distributed

    torch.distributed.destroy_process_group()


def exit_before_teardown(code):
    """Ends a distributed process with `code` as Python's own exit does (threads joined, atexit handlers run: logs,
    W&B, read-ahead threads, streams flushed) but without tearing the interpreter down.

    Why: a gloo worker thread may still be releasing the tensors of the last collective. destroy_process_group does
    not stop it while DeepSpeed or accelerate still hold the group, and if it takes the GIL once the teardown has
    begun, the rank aborts ("terminate called without an active exception", SIGABRT, a failed launch; PyTorch
    checks Py_IsInitialized but not finalization, pytorch/pytorch#190489)."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # private, but the only way to run the handlers without the teardown that follows
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
