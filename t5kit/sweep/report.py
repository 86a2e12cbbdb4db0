"""What a sweep leaves behind: trials.csv (and the same table logged), best_config.yaml, and plots.

best_config.yaml is flat flags: the command's base config files merged, then the best trial's flag values, with
output_dir pointing to a fresh folder, so `python PROGRAM best_config.yaml` reruns the best trial.
"""
import csv
import logging
import warnings
from pathlib import Path

import optuna
from optuna.trial import TrialState

from t5kit.config.parsing import load_yaml_config
from t5kit.outputs.atomic_files import atomic_write, write_yaml

logger = logging.getLogger(__name__)

TRIALS_FILE, BEST_CONFIG_FILE = "trials.csv", "best_config.yaml"
HISTORY_PLOT, IMPORTANCE_PLOT = "optimization_history.png", "param_importances.png"
FLAGS_ATTR = "flags"  # user attr: the flag values the program received (params hold Optuna's latent values)
BEST_RUN_DIR = "best_run"


def trial_rows(study, sweep):
    """One row per trial: number, state, value, then each searched flag's value as the program received it."""
    rows = []
    for trial in study.get_trials(deepcopy=False):
        received = trial.user_attrs.get(FLAGS_ATTR, {})
        row = {"number": trial.number, "state": trial.state.name,
               "value": "" if trial.value is None else trial.value}
        row.update({p.name: received.get(p.name, "") for p in sweep.searched})
        row["fail_reason"] = trial.user_attrs.get("fail_reason", "")
        rows.append(row)
    return rows


def write_trials_table(rows, path):
    if not rows:
        return None
    with atomic_write(path, "w") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def format_table(rows, columns_width=14):
    """The trials as aligned text for the log (the failure reason is left to the CSV)."""
    if not rows:
        return "(no trials yet)"
    columns = [c for c in rows[0] if c != "fail_reason"]
    def cell(v):
        return (f"{v:.6g}" if isinstance(v, float) else str(v))[:columns_width]
    lines = ["  ".join(c[:columns_width].ljust(columns_width) for c in columns)]
    lines += ["  ".join(cell(row[c]).ljust(columns_width) for c in columns) for row in rows]
    return "\n".join(lines)


def best_trial(study):
    completed = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    return study.best_trial if completed else None


def best_config(trial, base_configs, sweep_dir, list_flags=()):
    """Flat flags reproducing the best trial: base configs, then its flags, output_dir a fresh folder."""
    config = {}
    for path in base_configs:
        config.update(load_yaml_config(path))
    for name, value in trial.user_attrs[FLAGS_ATTR].items():
        if value is not None:  # `--train_files=a.txt` means [a.txt]; in YAML the list must be explicit
            config[name] = [value] if name in list_flags and not isinstance(value, list) else value
    config["output_dir"] = str(Path(sweep_dir) / BEST_RUN_DIR)
    return config


def write_plots(study, sweep_dir):
    """Optimisation history and parameter importances as PNG; each skipped plot logs why. Returns written paths."""
    import matplotlib
    matplotlib.use("Agg")  # files only, no display on cluster nodes
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as optuna_plots

    completed = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    varied = {name for name in {n for t in completed for n in t.params}
              if len({t.params.get(name) for t in completed}) > 1}
    plots = {HISTORY_PLOT: (optuna_plots.plot_optimization_history, None if completed else "no completed trial"),
             IMPORTANCE_PLOT: (optuna_plots.plot_param_importances,
                               None if len(completed) >= 2 and varied else
                               "needs >= 2 completed trials whose searched parameters differ")}
    written = []
    for name, (plot, skip_reason) in plots.items():
        if skip_reason:
            logger.info("skipped %s: %s", name, skip_reason)
            continue
        try:
            with warnings.catch_warnings():  # both plots are flagged experimental on every call
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                axes = plot(study)
        except (ValueError, RuntimeError) as err:  # e.g. importance evaluator refusing a degenerate space
            logger.info("skipped %s: %s", name, str(err).splitlines()[0])
            continue
        figure = axes.figure if hasattr(axes, "figure") else axes.flat[0].figure
        figure.tight_layout()
        figure.savefig(Path(sweep_dir) / name, dpi=100)
        plt.close(figure)
        written.append(Path(sweep_dir) / name)
    return written


def write_report(study, sweep, base_configs, sweep_dir, list_flags=()):
    """Logs the trials table and writes trials.csv, best_config.yaml and the plots into sweep_dir."""
    sweep_dir = Path(sweep_dir)
    rows = trial_rows(study, sweep)
    logger.info("trials of study %s:\n%s", study.study_name, format_table(rows))
    write_trials_table(rows, sweep_dir / TRIALS_FILE)
    best = best_trial(study)
    if best is None:
        logger.info("no completed trial: no %s", BEST_CONFIG_FILE)
    else:
        write_yaml(sweep_dir / BEST_CONFIG_FILE, best_config(best, base_configs, sweep_dir, list_flags))
        logger.info("best trial %d: %s = %.6g; rerun it with: python %s %s", best.number, sweep.metric,
                    best.value, sweep.program, sweep_dir / BEST_CONFIG_FILE)
    plots = write_plots(study, sweep_dir)
    logger.info("wrote %s: %s", sweep_dir, ", ".join([TRIALS_FILE] + [BEST_CONFIG_FILE] * (best is not None)
                                                     + [p.name for p in plots]))
    return rows
