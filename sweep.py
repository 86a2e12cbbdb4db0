"""Run a W&B sweep YAML offline: Optuna samples, prunes (hyperband) and records; no W&B server involved.

    python sweep.py sweeps/glue_sst2_sweep.yaml --trials 20                # SQLite in runs/sweeps/glue_sst2_sweep
    python sweep.py sweeps/pretrain_sweep.yaml --storage journal:///shared/sweeps/pt.journal --trials 40  # many nodes
    python sweep.py sweeps/glue_sst2_sweep.yaml --report                   # table, best_config.yaml, plots only

Each trial runs the sweep's `command` (W&B macros expanded) with `--output_dir=OUTPUT_DIR/trials/trial_NNNN`.
--trials N is the study's total (complete + pruned + failed, over every agent): start the same command again,
or on other nodes against one storage, and they share the work. Trials of a dead agent are marked FAIL
(t5kit/sweep/storage.py). A failing trial is recorded FAIL with its stderr tail and the sweep goes on; the agent
that finishes last writes the report, and exits 2 with the first failure's error line when no trial completed.
"""
import argparse
import logging
import signal
import sys
from pathlib import Path

from transformers import HfArgumentParser

from t5kit import cli
from t5kit.config import parsing
from t5kit.config.sweep_arguments import SWEEP_FLAG_CLASSES
from t5kit.errors import UsageError
from t5kit.sweep import report as sweep_report
from t5kit.sweep import space as sweep_space
from t5kit.sweep import storage as sweep_storage
from t5kit.sweep import study as sweep_study
from t5kit.sweep import trial as sweep_trial

logger = logging.getLogger("sweep")
DEFAULT_SWEEPS_DIR = "runs/sweeps"
USAGE = "python sweep.py SWEEP.yaml [--trials N] [--storage URL] [--report]"


def parse_args(argv):
    if "-h" in argv or "--help" in argv:  # asked for, so not an error: help on stdout, exit 0 like argparse's
        HfArgumentParser(SWEEP_FLAG_CLASSES, usage=USAGE, description=__doc__,
                         formatter_class=argparse.RawDescriptionHelpFormatter).print_help()
        raise SystemExit(0)
    if not argv or argv[0].startswith("-") or not argv[0].endswith((".yaml", ".yml")):
        raise UsageError(f"usage: {USAGE}")
    (args,) = parsing.parse_flags(SWEEP_FLAG_CLASSES, argv[1:])
    return argv[0], args


def main(argv=None):
    # 1. Flags, the sweep YAML and the program's flags: everything is checked before the study is touched.
    sweep_path, args = parse_args(sys.argv[1:] if argv is None else argv)
    sweep = sweep_space.load_sweep(sweep_path, args.study_name)
    if not any(macro in sweep.command for macro in sweep_trial.ARGS_MACROS):
        raise UsageError(f"{sweep.path.name}: command passes no parameters; add ${{args}} after ${{program}}")
    base_configs = sweep_trial.base_config_files(list(sweep.command))
    flag_classes = sweep_study.load_program_flags(sweep.program)
    sweep_study.check_parameters(sweep, flag_classes, base_configs)
    total = None if args.report else sweep_study.target_trials(sweep, args)

    # 2. Logging, sweep folder, storage and study (created, or loaded to resume).
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S",
                        level=logging.INFO, handlers=[logging.StreamHandler(sys.stdout)], force=True)
    sweep_dir = Path(args.output_dir or Path(DEFAULT_SWEEPS_DIR) / sweep.name)
    storage_url = args.storage or f"sqlite:///{(sweep_dir / 'sweep.db').resolve()}"
    sweep_study.make_sweep_folders(sweep_dir, storage_url, args)
    with sweep_storage.agents_lock(storage_url):
        study = sweep_study.open_study(sweep, args, storage_url, create=not args.report)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SLURM's time limit: FAIL the trial, then exit

    # 3. Trials until the study holds --trials of them, then the report.
    if not args.report:
        logger.info("sweep %s (%s, metric %s %s): study %r in %s, %d trials in total", sweep.path, sweep.method,
                    sweep.metric, sweep.goal, study.study_name, sweep_storage.redact(storage_url), total)
        while (trial := sweep_study.next_trial(study, sweep, args, storage_url, total)) is not None:
            sweep_study.run_one(study, sweep, trial, base_configs, sweep_dir, args)
        running = sweep_study.still_running(study, args, storage_url)
        if running:
            logger.info("trials %s still run in other agents: the last one to finish writes the report (or: python "
                        "sweep.py %s --report)", ", ".join(map(str, running)), sweep.path)
            return study
    sweep_report.write_report(study, sweep, base_configs, sweep_dir, sweep_study.list_flags(flag_classes))
    if not args.report:  # no completed trial: one error line naming the first failure and its log
        sweep_study.refuse_without_a_completed_trial(study, sweep_dir)
    return study


if __name__ == "__main__":
    cli.run_cli(main)
