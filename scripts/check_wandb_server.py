"""Checks that the W&B server answers, in seconds: slurm/wandb_sweep_agents.sbatch runs it before `wandb agent`,
which otherwise waits minutes on a node without network before its first trial fails.

    python -m scripts.check_wandb_server      # exit 0: the server answers (WANDB_BASE_URL, or wandb's settings)
    -> error: wandb agent: the W&B server https://... does not answer (connection refused; ...); ...

An agent fetches every run from the server, so WANDB_MODE=offline does not skip the check (t5kit/outputs/
wandb_server.py asks the server as a training run does before it reports to W&B).
"""
import logging
import sys

from t5kit import cli
from t5kit.errors import UsageError
from t5kit.outputs import wandb_server

logger = logging.getLogger("check_wandb_server")
AGENT_FIX = ("`wandb agent` needs the server: run the agents on nodes that reach it, or sweep without a server: "
             "python sweep.py SWEEP.yaml --storage journal:///SHARED/FOLDER/sweep.journal (docs/sweeps.md)")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        raise UsageError("usage: python -m scripts.check_wandb_server (no arguments: WANDB_* variables say which "
                         "server)")
    url = wandb_server.check_server(AGENT_FIX, who="wandb agent", offline_too=True)
    logging.basicConfig(format="%(message)s", level=logging.INFO)  # after: a refusal is the error line alone
    logger.info("the W&B server %s answers", url)
    return url


if __name__ == "__main__":
    cli.run_cli(main)
