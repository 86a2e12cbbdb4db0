"""Prints what `wandb agent` would run for W&B runs of a sweep YAML, and each run's output folder: the dry run of
slurm/wandb_sweep_agents.sbatch calls it with one run id per agent, so that one sees the runs get their own folders.

    python -m scripts.sweep_agent_command sweeps/glue_sst2_sweep.yaml --run_ids abc123 def456
    -> run abc123: WANDB_RUN_ID=abc123 /usr/bin/env python fine_tune_t5.py configs/glue/sst2.yaml ...
       run abc123: output_dir: runs/sweeps/glue_sst2_sweep/abc123

The parameters shown are the sweep's constants and the first value of each searched one (W&B samples them).
"""
import os
import shlex
import sys
from dataclasses import dataclass, field

from t5kit import cli
from t5kit.config import checks, parsing
from t5kit.errors import UsageError
from t5kit.sweep import space as sweep_space
from t5kit.sweep import trial as sweep_trial


@dataclass
class AgentCommandArguments:
    run_ids: list[str] = field(default_factory=lambda: ["dry-run"], metadata={
        "help": "W&B run ids, one per simulated run (the agent sets WANDB_RUN_ID to it)."})


def first_values(sweep):
    """A value for every parameter: constants as they are, searched ones at their first choice or their low end."""
    values = {}
    for param in sweep.params:
        if param.distribution is None:
            values[param.name] = param.constant
        else:
            first = getattr(param.distribution, "choices", None) or [param.distribution.low]
            values[param.name] = param.to_flag(first[0])
    return values


def last_output_dir(argv):
    """The --output_dir the program would use: the last one given (argparse's rule); None if none is."""
    found = None
    for i, token in enumerate(argv):
        if token.startswith("--output_dir="):
            found = token.split("=", 1)[1]
        elif token == "--output_dir" and i + 1 < len(argv):
            found = argv[i + 1]
    return found


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or not argv[0].endswith((".yaml", ".yml")):
        raise UsageError("usage: python -m scripts.sweep_agent_command SWEEP.yaml [--run_ids ID ...]")
    (args,) = parsing.parse_flags((AgentCommandArguments,), argv[1:])
    sweep = sweep_space.load_sweep(argv[0])
    for run_id in args.run_ids:
        command, env = sweep_trial.wandb_agent_command(sweep.command, sweep.program, first_values(sweep), run_id)
        print(f"run {run_id}: " + " ".join([*(f"{k}={v}" for k, v in env.items()), *map(shlex.quote, command)]))
        output_dir = last_output_dir(command)
        os.environ.update(env)
        shown = checks.expand_environment("--output_dir", output_dir) if output_dir else "(the base config's)"
        print(f"run {run_id}: output_dir: {shown}")


if __name__ == "__main__":
    cli.run_cli(main)
