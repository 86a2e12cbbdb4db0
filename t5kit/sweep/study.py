"""One sweep agent's work on a shared Optuna study: the program's flags checked against the sweep, trials asked for,
run and recorded (COMPLETE, PRUNED or FAIL), and the sweep folder made. sweep.py runs these steps."""
import functools
import importlib.util
import logging
from pathlib import Path

import optuna
from optuna.trial import TrialState
from transformers import HfArgumentParser

from t5kit.config import parsing
from t5kit.errors import UsageError, one_line, unknown_name_message
from t5kit.sweep import report as sweep_report
from t5kit.sweep import space as sweep_space
from t5kit.sweep import storage as sweep_storage
from t5kit.sweep import trial as sweep_trial

logger = logging.getLogger("sweep")
ENTRY_SCRIPTS_DIR = Path(__file__).resolve().parents[2]  # the repository root, where pre_train_t5.py lives


@functools.lru_cache(maxsize=None)  # loading a program file costs seconds (transformers)
def load_program_flags(program):
    """The program's flag dataclasses: ours from t5kit.config.script_flags (no entry script is imported); another
    program's FLAG_CLASSES, read from its own file (it must run nothing at import)."""
    path = Path(program)
    if not path.is_file() or path.suffix != ".py":
        raise UsageError(f"program: {program} (sweep YAML key) is not an existing .py file; run sweep.py from the "
                         "folder `wandb agent` would run in, or fix program")
    if path.resolve().parent == ENTRY_SCRIPTS_DIR:
        from t5kit.config import script_flags  # here, not at the top: a program outside the root never loads them

        if path.name in script_flags.FLAG_CLASSES_BY_PROGRAM:
            return script_flags.FLAG_CLASSES_BY_PROGRAM[path.name]
    spec = importlib.util.spec_from_file_location(f"sweep_program_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "FLAG_CLASSES"):
        raise UsageError(f"program {program} has no FLAG_CLASSES; sweep.py checks parameter names against them")
    return module.FLAG_CLASSES


def check_parameters(sweep, flag_classes, base_configs):
    """Refuses parameters that are not flags of the program, then parses one sample as the program would."""
    known = [action.dest for action in program_actions(flag_classes)]
    for param in sweep.params:
        if param.name == "output_dir":
            raise UsageError(f"{sweep.path.name}: parameter 'output_dir' is set per trial by sweep.py; remove it")
        if param.name not in known:
            raise UsageError(unknown_name_message("parameter", param.name,
                                                        f"{sweep.path.name} (not a flag of {sweep.program})", known))
    sample = {p.name: midpoint(p.distribution) for p in sweep.searched}
    argv = base_configs + [f"--{k}={sweep_trial.flag_text(v)}" for k, v in
                           sweep_space.trial_flags(sweep, sample).items() if v is not None]
    try:
        parsing.parse_flags(flag_classes, argv + ["--output_dir=/nonexistent/sweep-check"])
    except UsageError as err:
        raise UsageError(f"{sweep.path.name}: a sampled trial of {sweep.program} would be refused: {err}") from None


def program_actions(flag_classes):
    return [action for action in HfArgumentParser(flag_classes)._actions if action.dest != "help"]


def list_flags(flag_classes):
    """Flags that take several values: best_config.yaml writes a swept single value of one as a list."""
    return {action.dest for action in program_actions(flag_classes) if action.nargs in ("+", "*")}


def midpoint(distribution):
    if isinstance(distribution, optuna.distributions.CategoricalDistribution):
        return distribution.choices[0]
    middle = (distribution.low + distribution.high) / 2
    return int(middle) if isinstance(distribution, optuna.distributions.IntDistribution) else middle


def target_trials(sweep, args):
    if sweep.method == "grid":
        size = sweep_space.grid_size(sweep)
        if args.trials is not None and args.trials > size:
            logger.info("--trials %d > grid size %d: the grid is run once", args.trials, size)
        return min(args.trials or size, size)
    trials = args.trials or sweep.run_cap
    if trials is None:
        raise UsageError(f"method {sweep.method} needs --trials N (or run_cap in {sweep.path.name})")
    return trials


def target_reached(study, sweep):
    if sweep.target is None or not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        return False
    best = study.best_value
    return best >= sweep.target if sweep.goal == "maximize" else best <= sweep.target


def next_trial(study, sweep, args, storage_url, total):
    """Asks for a trial unless the study holds `total` trials already (or reached metric.target); else None."""
    with sweep_storage.agents_lock(storage_url):
        sweep_storage.fail_stale_trials(study, args.heartbeat_interval)
        if len(study.get_trials(deepcopy=False)) >= total or target_reached(study, sweep):
            return None
        trial = study.ask({p.name: p.distribution for p in sweep.searched})
        sweep_storage.stamp_agent(study, trial)
    if trial.number >= total:  # two agents on a database server asked at once
        trial.set_user_attr("fail_reason", f"surplus: the study already had {total} trials")
        study.tell(trial, state=TrialState.FAIL)
        return None
    return trial


def run_one(study, sweep, trial, base_configs, sweep_dir, args):
    """Runs one trial to COMPLETE, PRUNED or FAIL; a metric the program never reports is a UsageError."""
    flag_values = sweep_space.trial_flags(sweep, trial.params)
    trial.set_user_attr(sweep_report.FLAGS_ATTR, flag_values)
    name = f"trial_{trial.number:04d}"
    trial_dir = sweep_dir / "trials" / name
    argv = sweep_trial.expand_command(list(sweep.command), sweep.program, {**flag_values, "output_dir": str(trial_dir)},
                                      sweep_dir / "logs" / f"{name}.json")
    logger.info("trial %d: %s", trial.number, " ".join(argv))
    steps = []

    def report(value):
        steps.append(value)
        trial.report(value, len(steps))  # W&B's hyperband counts iterations as logged evaluations
        return trial.should_prune()

    try:
        outcome = sweep_trial.run_trial(argv, trial_dir, log_prefix(sweep_dir, trial.number),
                                        sweep_trial.trial_env(study.study_name, trial.number), sweep.metric, report,
                                        lambda: sweep_storage.beat(study, trial), args.heartbeat_interval)
    except BaseException:
        trial.set_user_attr("fail_reason", "agent interrupted")
        study.tell(trial, state=TrialState.FAIL)
        raise
    return record_outcome(study, sweep, trial, outcome)


def log_prefix(sweep_dir, number):
    """SWEEP_DIR/logs/trial_NNNN: where trial NNNN's program logs go (trial.log_paths)."""
    return Path(sweep_dir) / "logs" / f"trial_{number:04d}"


def still_running(study, args, storage_url):
    """Numbers of the trials other agents still run, once a dead agent's are marked FAIL: an agent that ends while
    there are some leaves the report to the last agent, which sees every trial finished."""
    with sweep_storage.agents_lock(storage_url):
        sweep_storage.fail_stale_trials(study, args.heartbeat_interval)
    return [t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))]


def first_failure(study, sweep_dir):
    """(number of FAIL trials, a line on the first one that ran a program: its error line and its log), or (0, "")."""
    failed = study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
    if not failed:
        return 0, ""
    logs = {t.number: sweep_trial.log_paths(log_prefix(sweep_dir, t.number))[1] for t in failed}
    first = min(failed, key=lambda t: (not logs[t.number].is_file(), t.number))
    said = sweep_trial.error_line(logs[first.number]) or one_line(first.user_attrs.get("fail_reason", ""))
    where = f" (log: {logs[first.number]})" if logs[first.number].is_file() else ""
    return len(failed), f"trial {first.number}: {said}{where}"


def refuse_without_a_completed_trial(study, sweep_dir):
    """An agent's sweep with no COMPLETE trial has no result: one error line (exit 2) with the first failure; with
    one, the failures are a warning."""
    trials = study.get_trials(deepcopy=False)
    failed, first = first_failure(study, sweep_dir)
    if study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if failed:
            logger.warning("%d of %d trials failed; the first, %s", failed, len(trials), first)
        return
    detail = f"{failed} of {len(trials)} failed; the first, {first}" if failed else f"{len(trials)} ended unfinished"
    raise UsageError(f"no trial of study {study.study_name!r} completed: {detail}; fix that, then rerun with a "
                     "larger --trials (failed trials count towards it) or another --study_name")


def record_outcome(study, sweep, trial, outcome):
    if outcome.state == "complete":
        study.tell(trial, outcome.value)
        logger.info("trial %d COMPLETE: %s = %.6g", trial.number, sweep.metric, outcome.value)
    elif outcome.state == "pruned":
        study.tell(trial, state=TrialState.PRUNED)
        logger.info("trial %d PRUNED by %s", trial.number, type(study.pruner).__name__)
    else:
        trial.set_user_attr("fail_reason", outcome.detail[-sweep_trial.STDERR_TAIL_CHARS:])
        study.tell(trial, state=TrialState.FAIL)
        logger.warning("trial %d FAIL: %s", trial.number, outcome.detail)
        if outcome.reported and sweep.metric not in outcome.reported:
            raise UsageError(f"metric {sweep.metric!r} of {sweep.path.name} is never reported by {sweep.program}; "
                             f"it reported: {', '.join(outcome.reported)}")
    return outcome.state


def open_study(sweep, args, storage_url, create):
    storage = sweep_storage.open_storage(storage_url)
    name = args.study_name or sweep.name
    if not create:
        try:
            return optuna.load_study(study_name=name, storage=storage)
        except KeyError:
            raise UsageError(f"no study {name!r} in {sweep_storage.redact(storage_url)}; run the sweep first")
    return optuna.create_study(study_name=name, storage=storage, load_if_exists=True,
                               direction=sweep.goal, sampler=sweep_space.build_sampler(sweep, args.seed),
                               pruner=sweep_space.build_pruner(sweep))


def make_sweep_folders(sweep_dir, storage_url, args):
    """Refuses an --output_dir that is a file and creates the storage's folder, so a path that cannot be a folder
    is one line naming its flag rather than a traceback from mkdir."""
    if sweep_dir.exists() and not sweep_dir.is_dir():
        raise UsageError(f"--output_dir {sweep_dir} is an existing file; give a folder (new or a sweep's)")
    store = sweep_storage.storage_file(storage_url)
    if store is None:
        return
    flag = f"--storage {sweep_storage.redact(storage_url)}" if args.storage else f"--output_dir {sweep_dir}"
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"{flag}: cannot create folder {store.parent} ({err.strerror}); "
                         "give a writable path") from None
