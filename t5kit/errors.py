"""The one usage-error type, and the one wording of "did you mean" hints.

Bad input raises UsageError wherever it is found; only `t5kit.cli.run_cli` turns it into the `error: ...` line and
exit code 2. Anything else that goes wrong is a bug and keeps its traceback.
"""
import difflib


class UsageError(Exception):
    """Bad input from the user. Entry scripts print it as one `error: ...` line and exit with code 2."""


def closest_names(name, choices, n=3):
    """Up to n valid names closest to a misspelt one, for "did you mean" hints."""
    return difflib.get_close_matches(str(name), [str(choice) for choice in choices], n=n, cutoff=0.6)


def did_you_mean(name, choices, list_choices=True, n=3):
    """The tail of a message about an unknown name: "; did you mean 'x'?" when a valid name is close (up to n of
    them), then " choices: a, b" when `list_choices` (for short lists; long ones point to --help instead)."""
    choices = [str(choice) for choice in choices]
    close = closest_names(name, choices, n=n)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    if list_choices:
        return hint + ("" if close else ";") + f" choices: {', '.join(choices)}"
    return hint or "; see --help for valid names"


def unknown_name_message(kind, name, where, choices):
    """One line for an unknown key/flag/parameter, with the closest valid names suggested."""
    return f"unknown {kind} {name!r} in {where}{did_you_mean(name, choices, list_choices=False)}"


def one_line(error):
    """An exception's whole message on one line (HF's validation errors span several; the error line is one)."""
    return " ".join(line.strip() for line in str(error).splitlines() if line.strip())
