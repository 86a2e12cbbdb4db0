"""The flags of sweep.py (the sweep YAML itself is read by t5kit/sweep/space.py), and its Program: declared here
rather than in script_flags.py, whose training groups would cost every agent seconds of imports at its start."""
from dataclasses import dataclass, field

from t5kit.config.output_arguments import OutputDirArguments
from t5kit.config.parsing import Program
from t5kit.errors import UsageError


@dataclass
class SweepArguments(OutputDirArguments):
    """The study's storage, name, size and seed; --output_dir (the shared group's) is the sweep folder:
    trials/trial_NNNN (each trial's --output_dir), logs/, trials.csv, best_config.yaml, plots."""

    storage: str = field(default=None, metadata={
        "help": "Optuna storage URL: sqlite:///PATH (default OUTPUT_DIR/sweep.db), journal:///PATH on a shared "
                "filesystem, or postgresql://... / mysql://... for agents on several nodes."})
    study_name: str = field(default=None, metadata={
        "help": "Study in the storage; agents with the same name share it. Default: the sweep's name, else the "
                "YAML's file name."})
    trials: int = field(default=None, metadata={
        "help": "Total trials of the study over all agents (complete + pruned + failed). Default: run_cap from the "
                "YAML; grid: the grid size (also the cap)."})
    seed: int = field(default=None, metadata={
        "help": "Optuna's sampler seed (not the trials' --seed, which the sweep YAML sets). Unset (default) when "
                "several agents share a study, else they propose alike."})
    heartbeat_interval: float = field(default=60.0, metadata={
        "help": "Seconds between a running trial's heartbeats; after 3 missed ones other agents mark it FAIL."})
    report: bool = field(default=False, metadata={
        "help": "Only write the report (trials.csv, best_config.yaml, plots) of the study so far; run nothing."})

    def __post_init__(self):
        if self.trials is not None and self.trials < 1:
            raise UsageError(f"--trials={self.trials} must be >= 1")
        if self.heartbeat_interval <= 0:
            raise UsageError(f"--heartbeat_interval={self.heartbeat_interval} must be > 0")


SWEEP_FLAG_CLASSES = Program((SweepArguments,))
