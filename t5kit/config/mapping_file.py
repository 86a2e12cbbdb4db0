"""The one reader of a settings file that must hold a mapping: run configs (parsing.py), DeepSpeed JSONs
(launch_checks.py) and W&B sweep YAMLs (sweep/space.py). Each refusal is one line naming the file:

    config file c.yaml not found; check the path
    config file c.yaml is not valid YAML: line 2, column 1: expected ',' or ']'
    --deepspeed file ds.json is not valid JSON: line 1, column 2: Expecting property name enclosed in double quotes
    sweep file s.yaml must be a mapping of program, method, metric and parameters, got a list
"""
import json
from pathlib import Path

import yaml

from t5kit.errors import UsageError

SYNTAXES = ("YAML", "JSON")


def read_mapping(path, what, holds, syntax="YAML", missing_hint="check the path"):
    """The mapping a YAML or JSON file holds (an empty YAML file holds an empty one), or UsageError naming the file.

    what: how the file is named in messages ("config file", "--deepspeed file"); holds: what its mapping maps, for
    the non-mapping message ("flag: value"); missing_hint: the fix when the file is absent."""
    if syntax not in SYNTAXES:
        raise ValueError(f"syntax {syntax!r} is not one of {SYNTAXES}")
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{what} {path} not found; {missing_hint}")
    text = path.read_text()
    try:
        content = json.loads(text) if syntax == "JSON" else yaml.safe_load(text)
    except json.JSONDecodeError as err:
        raise UsageError(f"{what} {path} is not valid JSON: line {err.lineno}, column {err.colno}: {err.msg}") from None
    except yaml.YAMLError as err:
        raise UsageError(f"{what} {path} is not valid YAML: {yaml_error_where(err)}") from None
    if content is None and syntax == "YAML":  # only comments, or nothing: YAML's empty document
        content = {}
    if not isinstance(content, dict):
        raise UsageError(f"{what} {path} must be a mapping of {holds}, got a {type(content).__name__}")
    return content


def yaml_error_where(err):
    """'line 3, column 7: expected ...': where the parser stopped and why, on one line."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    context = getattr(err, "context", None)
    what = f"{problem} ({context})" if context else problem
    return f"line {mark.line + 1}, column {mark.column + 1}: {what}" if mark is not None else what
