"""Step 8 of both trainers' entry scripts: the run record and out.log, written only once every input has been
checked (so a refused run leaves its output folder as it was), and the arguments the trainer gets.

    record, trainer_args = run_start.start_run_outputs(training_args, record, derived, resume_point.checkpoint)
"""
from t5kit.outputs import hub_upload, out_log, run_record


def start_run_outputs(training_args, record, derived, checkpoint):
    """Writes OUTPUT_DIR/config.yaml (rank 0: the flags and the derived values) and opens out.log (appending after a
    boundary line when resuming from `checkpoint`). Returns the complete record (what the W&B config gets) and the
    trainer's copy of the arguments, HF's own push off: ours runs once, after the local save (hub_upload.py says
    why)."""
    record = {**record, run_record.DERIVED_KEY: derived}
    if training_args.should_save:
        run_record.write_run_record(training_args.output_dir, record)
    out_log.open_run_log(training_args, checkpoint)
    return record, hub_upload.trainer_arguments(training_args)
