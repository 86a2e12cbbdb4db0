# shellcheck shell=bash
# Sourced by the multi-node sbatch scripts (after topology.sh, which defines `run`): pre-emption saves, stops and
# requeues. SLURM sends USR1 to the batch shell 300 s before the time limit (#SBATCH --signal=B:USR1@300). The
# trap sends USR1 to every process of the job steps; the training processes save a checkpoint at their next step
# and exit 0 (t5kit/train/preemption.py); then the job is requeued (#SBATCH --requeue) and the requeued job
# (SLURM_RESTART_COUNT > 0) resumes with --resume_from_checkpoint auto, i.e. from the newest complete checkpoint.
# Launchers between srun and the training processes (accelerate/torchrun) must ignore USR1 (`trap '' USR1` before
# `exec`): an ignored signal stays ignored across exec, and only the training processes install a handler.

# Extra entry-script flags on a requeued run. The first run gets none, so it still refuses a non-empty output dir.
# shellcheck disable=SC2034  # used by the sbatch scripts that source this file
RESUME_FLAGS=()
if [[ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]]; then
  RESUME_FLAGS=(--resume_from_checkpoint auto)
  echo "restart ${SLURM_RESTART_COUNT}: resuming from the newest complete checkpoint"
fi

PREEMPTED=0
on_preempt() {
  PREEMPTED=1
  echo "pre-emption signal: asking the training processes to save a checkpoint and stop"
  scancel --signal=USR1 "$SLURM_JOB_ID"  # job steps only (not this batch shell, which would loop)
}

# run_requeueable CMD...: `run CMD` in the background (bash runs a trap only between foreground commands, so a
# foreground launcher would delay it until the end), then requeue the job if it was pre-empted and saved.
# A stopped run and a finished one both exit 0; rank 0 writes $T5_PREEMPTED_MARKER only when it stopped for the
# signal (t5kit/train/preemption.py), so a run that finished inside the warning window is not requeued.
run_requeueable() {
  local launcher status=0
  export T5_PREEMPTED_MARKER="${SLURM_SUBMIT_DIR:-$PWD}/.t5-preempted-${SLURM_JOB_ID:-0}"
  rm -f "$T5_PREEMPTED_MARKER"
  trap on_preempt USR1
  run "$@" &
  launcher=$!
  while true; do
    wait "$launcher" && status=0 || status=$?
    kill -0 "$launcher" 2>/dev/null || break  # wait returned early because the trap ran: keep waiting
  done
  trap - USR1
  if ((PREEMPTED)) && ((status == 0)); then
    if [[ -f "$T5_PREEMPTED_MARKER" ]]; then
      echo "checkpoint saved; requeueing job $SLURM_JOB_ID"
      scontrol requeue "$SLURM_JOB_ID"
    else
      echo "the run finished before the pre-emption signal stopped it: not requeueing"
    fi
  fi
  rm -f "$T5_PREEMPTED_MARKER"
  return "$status"
}
