"""W&B sweep YAML -> Optuna: validation, parameter distributions, sampler and pruner.

The same file drives `wandb sweep` and the offline `sweep.py`. Each parameter becomes a `SweepParam`: an Optuna
distribution over a latent value, and `to_flag`, which maps the latent value to the value the program receives.
Where W&B draws a value and then transforms it (rounding to q, exp, the normal's inverse CDF), Optuna samples the
untransformed draw and `to_flag` applies W&B's transform, so random sampling follows W&B's distribution exactly.

    W&B distribution          Optuna latent                               flag value
    value / constant          (not sampled)                               value
    values / categorical      CategoricalDistribution(values)             value
    int_uniform               IntDistribution(min, max)                   value (min..max inclusive)
    uniform                   FloatDistribution(min, max)                 value
    log_uniform_values        FloatDistribution(min, max, log)            value
    log_uniform               FloatDistribution(e^min, e^max, log)        value (min, max are exponents of e)
    inv_log_uniform_values    FloatDistribution(min, max, log)            value (1/X log-uniform <=> X log-uniform)
    inv_log_uniform           FloatDistribution(e^-max, e^-min, log)      value (log(1/X) ~ U(min, max))
    q_uniform / q_log_uniform[_values]  as above                          round(x / q) * q  (int if q, min, max are)
    normal / log_normal       FloatDistribution(0, 1) = u                 mu + sigma * Phi^-1(u)  (then exp)
    q_normal / q_log_normal   FloatDistribution(0, 1) = u                 the above, rounded to q
Refused by name: `probabilities` (weighted categorical), nested `parameters`, hyperband `strict`, any other
distribution, early_terminate type or top-level key.
"""
import math
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any, Callable

import optuna

from t5kit.config.mapping_file import read_mapping
from t5kit.errors import UsageError, did_you_mean

METHODS = ("grid", "random", "bayes")
GOALS = ("minimize", "maximize")
# Keys `wandb sweep` accepts that change nothing offline (where runs are logged, run_cap = default --trials).
TOP_LEVEL_KEYS = ("program", "method", "metric", "parameters", "early_terminate", "command", "name",
                  "description", "project", "entity", "run_cap")
PARAM_KEYS = ("value", "values", "distribution", "min", "max", "mu", "sigma", "q")
METRIC_KEYS = ("name", "goal", "target")
HYPERBAND_KEYS = ("type", "min_iter", "max_iter", "s", "eta", "strict")
DEFAULT_COMMAND = ("${env}", "${interpreter}", "${program}", "${args}")  # what wandb agent runs without `command`
NORMAL_EDGE = 1e-12  # keeps the normal's latent u off 0 and 1, where the inverse CDF is infinite


@dataclass(frozen=True)
class SweepParam:
    name: str
    distribution: Any = None  # optuna distribution of the latent value; None for a constant
    to_flag: Callable = None  # latent value -> the flag value the program receives
    constant: Any = None
    grid_values: tuple = ()  # grid method: the values enumerated

    def flag_value(self, params):
        return self.constant if self.distribution is None else self.to_flag(params[self.name])


@dataclass(frozen=True)
class Sweep:
    path: Path
    name: str
    program: str
    method: str
    metric: str  # as the program writes it: eval_accuracy (W&B's eval/accuracy is accepted and mapped)
    goal: str
    target: float | None
    params: tuple
    command: tuple
    early_terminate: dict | None
    run_cap: int | None
    raw: dict = field(repr=False, default=None)

    @property
    def searched(self):
        return [p for p in self.params if p.distribution is not None]


def refuse(path, message):
    raise UsageError(f"{Path(path).name}: {message}")


def check_keys(path, where, given, allowed, what="key"):
    for key in given:
        if key not in allowed:
            refuse(path, f"unsupported W&B sweep {what} {key!r} in {where}{did_you_mean(key, allowed)}")


def program_metric_name(name):
    """HF's WandbCallback logs `eval_accuracy` as `eval/accuracy`: a W&B metric name maps back to the file's name."""
    for wandb_prefix, hf_prefix in (("eval/", "eval_"), ("test/", "test_"), ("train/", "")):
        if name.startswith(wandb_prefix):
            return hf_prefix + name[len(wandb_prefix):]
    return name


def load_sweep(path, name=None):
    """Reads and validates a W&B sweep YAML into a Sweep; every problem is one UsageError naming the file."""
    path = Path(path)
    raw = read_mapping(path, "sweep file", "program, method, metric and parameters")
    check_keys(path, "the sweep", raw, TOP_LEVEL_KEYS)
    for key in ("program", "method", "parameters"):
        if key not in raw:
            refuse(path, f"missing {key!r}")
    method = raw["method"]
    if method not in METHODS:
        refuse(path, f"unknown method {method!r}{did_you_mean(method, METHODS)}")
    metric, goal, target = parse_metric(path, raw.get("metric"))
    if not isinstance(raw["parameters"], dict) or not raw["parameters"]:
        refuse(path, "parameters must map flag names to {value | values | distribution, min, max}")
    params = tuple(parse_param(path, key, spec, method) for key, spec in raw["parameters"].items())
    command = tuple(str(token) for token in raw.get("command", DEFAULT_COMMAND))
    if "${program}" not in command:
        refuse(path, "command must contain ${program}")
    return Sweep(path=path, name=name or raw.get("name") or path.stem, program=parse_program(path, raw["program"]),
                 method=method, metric=metric, goal=goal, target=target, params=params, command=command,
                 early_terminate=parse_early_terminate(path, raw.get("early_terminate")),
                 run_cap=parse_run_cap(path, raw.get("run_cap")), raw=raw)


def positive_int(value, least=1):
    return isinstance(value, int) and not isinstance(value, bool) and value >= least  # YAML's true is an int


def parse_program(path, program):
    """W&B runs `${interpreter} ${program}` and sweep.py imports its FLAG_CLASSES: it must be a Python script."""
    if not isinstance(program, str) or not program.endswith(".py"):
        refuse(path, f"program: {program!r} is not a .py file; set program to the entry script, e.g. fine_tune_t5.py")
    return program


def parse_run_cap(path, run_cap):
    # Checked here, not at the first trial: a bad cap would otherwise create the study, then fail or run nothing.
    if run_cap is not None and not positive_int(run_cap):
        refuse(path, f"run_cap: {run_cap!r} must be a positive integer (the default --trials); fix or remove it")
    return run_cap


def parse_metric(path, metric):
    if not isinstance(metric, dict) or "name" not in metric:
        refuse(path, "needs metric: {name: eval_..., goal: minimize|maximize}; the offline runner optimises it")
    check_keys(path, "metric", metric, METRIC_KEYS)
    goal = metric.get("goal", "minimize")  # W&B's default
    if goal not in GOALS:
        refuse(path, f"unknown metric goal {goal!r}{did_you_mean(goal, GOALS)}")
    target = metric.get("target")
    if target is not None and (not isinstance(target, (int, float)) or isinstance(target, bool)):
        # compared with the best value after each trial: a string would fail only once a trial has trained
        refuse(path, f"metric target {target!r} must be a number (the sweep stops once the best value reaches it); "
                     "fix or remove it")
    return program_metric_name(str(metric["name"])), goal, target


def parse_early_terminate(path, spec):
    """Hyperband settings as HyperbandPruner arguments; W&B counts iterations as logged evaluations."""
    if spec is None:
        return None
    if not isinstance(spec, dict) or spec.get("type") != "hyperband":
        refuse(path, f"unsupported early_terminate type {spec.get('type') if isinstance(spec, dict) else spec!r}; "
                     "only hyperband maps to Optuna")
    check_keys(path, "early_terminate", spec, HYPERBAND_KEYS)
    if spec.get("strict"):
        refuse(path, "unsupported W&B feature early_terminate.strict (no Optuna equivalent); remove it")
    for key, least in (("min_iter", 1), ("max_iter", 1), ("eta", 2), ("s", 1)):  # YAML may give "27" or 2.5
        if key in spec and not positive_int(spec[key], least):
            refuse(path, f"early_terminate {key}={spec[key]!r} must be an integer >= {least}")
    eta = spec.get("eta", 3)
    if "min_iter" in spec:
        if "s" in spec:
            refuse(path, "early_terminate: s goes with max_iter (brackets max_iter/eta^k), not with min_iter")
        min_iter, max_iter = spec["min_iter"], spec.get("max_iter", "auto")
        if max_iter != "auto" and min_iter > max_iter:
            refuse(path, f"early_terminate min_iter {min_iter} > max_iter {max_iter}; lower min_iter")
    elif "max_iter" in spec:
        # W&B: brackets at max_iter/eta, ..., max_iter/eta^s: the smallest one is Optuna's min_resource.
        max_iter = spec["max_iter"]
        min_iter = max(1, round(max_iter / eta ** spec.get("s", 0)))
    else:
        refuse(path, "early_terminate hyperband needs min_iter (or max_iter with s)")
    return {"min_resource": min_iter, "max_resource": max_iter, "reduction_factor": eta}


def parse_param(path, name, spec, method):
    """One W&B parameter -> SweepParam; W&B's rules: values -> categorical, int min/max -> int_uniform."""
    where = f"parameter {name!r}"
    if not isinstance(spec, dict):
        refuse(path, f"{where} must be a mapping like {{values: [...]}} or {{distribution: uniform, min:, max:}}")
    if "parameters" in spec:
        refuse(path, f"unsupported W&B feature: nested parameters in {where}; flatten them into flag names")
    if "probabilities" in spec:
        refuse(path, f"unsupported W&B feature: probabilities in {where} (Optuna samples categories uniformly)")
    check_keys(path, where, spec, PARAM_KEYS)
    distribution = spec.get("distribution") or infer_distribution(spec)
    if distribution not in DISTRIBUTIONS:
        refuse(path, f"unknown distribution {distribution!r} in {where}{did_you_mean(distribution, DISTRIBUTIONS)}")
    param = DISTRIBUTIONS[distribution](path, name, spec)
    if method == "grid" and param.distribution is not None and not param.grid_values:
        refuse(path, f"method grid cannot enumerate distribution {distribution!r} of {where}; give values")
    return param


def infer_distribution(spec):
    if "value" in spec:
        return "constant"
    if "values" in spec:
        return "categorical"
    if isinstance(spec.get("min"), int) and isinstance(spec.get("max"), int):
        return "int_uniform"
    return "uniform"


def need(path, name, spec, *keys):
    """The numeric settings a distribution needs, refusing missing ones and min > max."""
    for key in keys:
        if not isinstance(spec.get(key), (int, float)) or isinstance(spec.get(key), bool):
            refuse(path, f"parameter {name!r} needs a number {key!r} for distribution "
                         f"{spec.get('distribution', 'uniform')!r}")
    if "min" in keys and spec["min"] > spec["max"]:
        refuse(path, f"parameter {name!r}: min {spec['min']} > max {spec['max']}")
    return [spec[key] for key in keys]


def check_flag_value(path, name, value):
    if not (value is None or isinstance(value, (bool, int, float, str))):
        refuse(path, f"parameter {name!r}: value {value!r} is a {type(value).__name__}; "
                     "sweeps pass one scalar per flag")
    return value


def constant(path, name, spec):
    if "value" not in spec:
        refuse(path, f"parameter {name!r}: distribution constant needs value")
    return SweepParam(name, constant=check_flag_value(path, name, spec["value"]))


def categorical(path, name, spec):
    values = spec.get("values")
    if not isinstance(values, list) or not values:
        refuse(path, f"parameter {name!r}: values must be a non-empty list")
    values = tuple(check_flag_value(path, name, v) for v in values)
    return SweepParam(name, optuna.distributions.CategoricalDistribution(values), lambda x: x, grid_values=values)


def int_uniform(path, name, spec):
    low, high = need(path, name, spec, "min", "max")
    if not (isinstance(low, int) and isinstance(high, int)):
        refuse(path, f"parameter {name!r}: int_uniform needs integer min and max, got {low!r}, {high!r}")
    return SweepParam(name, optuna.distributions.IntDistribution(low, high), int,
                      grid_values=tuple(range(low, high + 1)))


def rounder(spec, integral):
    """W&B's q-rounding: round(x / q) * q, an int when q, min and max are ints (so int flags parse)."""
    q = spec.get("q", 1)
    if not isinstance(q, (int, float)) or q <= 0:
        raise UsageError(f"q={q!r} must be a positive number")
    if integral and isinstance(q, int):
        return lambda x: int(round(x / q) * q)
    return lambda x: round(round(x / q) * q, 12)  # the 12-digit rounding drops float noise like 0.30000000000000004


def float_range(path, name, spec, log, exponents, inverse):
    low, high = need(path, name, spec, "min", "max")
    if exponents:  # log_uniform: min/max are natural-log exponents
        return (math.exp(-high), math.exp(-low)) if inverse else (math.exp(low), math.exp(high))
    if log and low <= 0:
        refuse(path, f"parameter {name!r}: {spec.get('distribution')} needs min > 0, got {low}")
    return low, high


def uniform_family(log=False, exponents=False, inverse=False, quantized=False):
    def build(path, name, spec):
        low, high = float_range(path, name, spec, log, exponents, inverse)
        distribution = optuna.distributions.FloatDistribution(low, high, log=log)
        integral = not exponents and isinstance(spec["min"], int) and isinstance(spec["max"], int)
        to_flag = reject_bad_q(path, name, spec, integral) if quantized else float
        return SweepParam(name, distribution, to_flag)
    return build


def reject_bad_q(path, name, spec, integral):
    try:
        return rounder(spec, integral)
    except UsageError as err:
        refuse(path, f"parameter {name!r}: {err}")


def normal_family(log=False, quantized=False):
    def build(path, name, spec):
        mu, sigma = spec.get("mu", 0.0), spec.get("sigma", 1.0)
        need(path, name, {"mu": mu, "sigma": sigma, "distribution": spec.get("distribution")}, "mu", "sigma")
        if sigma <= 0:
            refuse(path, f"parameter {name!r}: sigma {sigma} must be > 0")
        shape = NormalDist(mu, sigma)
        round_q = reject_bad_q(path, name, spec, False) if quantized else float

        def to_flag(u):
            draw = shape.inv_cdf(min(max(u, NORMAL_EDGE), 1 - NORMAL_EDGE))
            return round_q(math.exp(draw) if log else draw)
        return SweepParam(name, optuna.distributions.FloatDistribution(0.0, 1.0), to_flag)
    return build


DISTRIBUTIONS = {
    "constant": constant,
    "categorical": categorical,
    "int_uniform": int_uniform,
    "uniform": uniform_family(),
    "log_uniform_values": uniform_family(log=True),
    "log_uniform": uniform_family(log=True, exponents=True),
    "inv_log_uniform_values": uniform_family(log=True),
    "inv_log_uniform": uniform_family(log=True, exponents=True, inverse=True),
    "q_uniform": uniform_family(quantized=True),
    "q_log_uniform_values": uniform_family(log=True, quantized=True),
    "q_log_uniform": uniform_family(log=True, exponents=True, quantized=True),
    "normal": normal_family(),
    "log_normal": normal_family(log=True),
    "q_normal": normal_family(quantized=True),
    "q_log_normal": normal_family(log=True, quantized=True),
}


def grid_size(sweep):
    return math.prod(len(p.grid_values) for p in sweep.searched)


class SweepGridSampler(optuna.samplers.GridSampler):
    """GridSampler without its study.stop() after the last grid point, which raises outside study.optimize;
    sweep.py stops by itself once the study holds grid-size trials."""

    def after_trial(self, study, trial, state, values):
        pass


def build_sampler(sweep, seed=None):
    """grid -> GridSampler over the values, random -> RandomSampler, bayes -> TPESampler."""
    if sweep.method == "grid":
        return SweepGridSampler({p.name: list(p.grid_values) for p in sweep.searched}, seed=seed)
    if sweep.method == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed)


def build_pruner(sweep):
    if sweep.early_terminate is None:
        return optuna.pruners.NopPruner()
    return optuna.pruners.HyperbandPruner(**sweep.early_terminate)


def trial_flags(sweep, params):
    """{flag: value} the program receives for one trial's sampled (latent) params, constants included."""
    return {p.name: p.flag_value(params) for p in sweep.params}
