"""Flags: dataclasses for HfArgumentParser, YAML configs with `_include`, command-line overrides, validation."""


class UsageError(Exception):
    """Bad input from the user. Entry scripts print it as one `error: ...` line and exit with code 2."""
