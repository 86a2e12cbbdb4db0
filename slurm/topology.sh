# shellcheck shell=bash
# Sourced by the sbatch scripts: reads the job topology from SLURM's environment and defines `run`, which
# prints the exact command instead of running it under DRY_RUN=1 (or a leading --dry-run argument).
# No hyperparameter lives here: batch size, precision, learning rate come from the YAML config and flags.

: "${SLURM_JOB_NODELIST:?not inside a SLURM job: submit with sbatch (or set DRY_RUN=1 and a fake SLURM env)}"
NNODES=${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-1}}
GPUS_PER_NODE=${SLURM_GPUS_ON_NODE:-${SLURM_GPUS_PER_NODE:-1}}
GPUS_PER_NODE=${GPUS_PER_NODE##*:}  # "gpu:4" -> 4
WORLD_SIZE=$((NNODES * GPUS_PER_NODE))
mapfile -t HOSTS < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
MASTER_ADDR=${HOSTS[0]}
# One port per job, so two jobs sharing a node do not collide (range 20000-29999).
MASTER_PORT=${MASTER_PORT:-$((20000 + ${SLURM_JOB_ID:-0} % 10000))}
export NNODES GPUS_PER_NODE WORLD_SIZE MASTER_ADDR MASTER_PORT
# The repository root: sbatch runs a copy of the script, so locate the checkout by the submit directory.
REPO_DIR=${REPO_DIR:-${SLURM_SUBMIT_DIR:-$PWD}}

run() {
  if [[ "${DRY_RUN:-0}" == 1 ]]; then
    echo "+ $*"
  else
    "$@"
  fi
}

echo "job ${SLURM_JOB_ID:-?}: ${NNODES} node(s) x ${GPUS_PER_NODE} GPU(s) = ${WORLD_SIZE} processes," \
     "master ${MASTER_ADDR}:${MASTER_PORT}, nodes ${HOSTS[*]}"
