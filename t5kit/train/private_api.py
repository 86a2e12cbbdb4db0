"""Where our trainers hook into transformers' private API, and the versions that was tested against.

The mixins override private Seq2SeqTrainer methods (PRIVATE_HOOKS) and GroupedAdafactor calls one private
Adafactor helper. A transformers release that renamed one would silently switch off atomic checkpoints or the
non-finite guard, so requirements.txt bounds transformers above by the newest release the suite passed on,
tests/train/test_private_api.py checks that every hook still exists with the parameters we call it with, and a run on a
version outside TESTED_VERSIONS logs a warning naming it. accelerate and deepspeed are used through their public
API only: they get no upper bound, but a warning all the same, as the Trainer leans on both. One seam lies outside
the Trainer: ctranslate2's TransformersConverter reads our saved models with transformers (export_t5.py), so
requirements.txt bounds ctranslate2 below 5 and tests/model/test_ctranslate2_backend.py's ConverterSeamTest
converts a tiny model.
"""
import importlib.metadata
import logging

from packaging.version import InvalidVersion, Version

logger = logging.getLogger(__name__)

# The private Seq2SeqTrainer methods our mixins and trainers override, with the parameters they use.
PRIVATE_HOOKS = {
    "_get_output_dir": ("trial",),  # checkpointing: stage each save in OUTPUT_DIR/.saving
    "_save_checkpoint": ("model", "trial"),  # checkpointing: commit + rotate; stream_resume: stream position
    "_get_grad_norm": ("model", "grad_norm"),  # nonfinite_guard: the verdict just before optimizer.step()
    "_maybe_log_save_evaluate": (),  # nonfinite_guard: read a pending verdict before a log, save or evaluation
    "_get_collator_with_removed_columns": ("data_collator", "description"),  # stream_resume: keep window ids
    "_get_train_sampler": ("train_dataset",),  # task_trainer: length buckets
    "_get_eval_sampler": ("eval_dataset",),  # task_trainer: file order
    "_set_signature_columns_if_needed": (),  # task_trainer: keep row_index, which per-row ranking reads
}
# Public methods we override that take a private parameter (their callers inside Trainer pass it).
PRIVATE_PARAMETERS = {"save_model": ("output_dir", "_internal_call")}  # checkpointing: FSDP's final full save
PRIVATE_CALLS = {"_prepare_inputs": ("inputs",),  # task_trainer: rank scoring moves its batch to the device
                 "_save": ("output_dir", "state_dict"),  # checkpointing: FSDP2's final model, gathered
                 "_remove_unused_columns": ("dataset", "description")}  # packed_loader: --packing's loader
ADAFACTOR_PRIVATE = {"_approx_sq_grad": ("exp_avg_sq_row", "exp_avg_sq_col")}  # optim/grouped_adafactor.py

# Inclusive ranges the test suite passed on. requirements.txt pins transformers' upper bound to the last one.
TESTED_VERSIONS = {"transformers": ("5.23.0", "5.24.0"), "accelerate": ("1.15.0", "1.16.0"),
                   "deepspeed": ("0.19.8", "0.19.8")}


def untested_versions(installed=None):
    """[(package, installed version, (lowest, highest) tested)] for each package outside its tested range."""
    found = []
    for package, (low, high) in TESTED_VERSIONS.items():
        version = installed.get(package) if installed is not None else _installed(package)
        if version is None:
            continue
        try:
            inside = Version(low) <= Version(version) <= Version(high)
        except InvalidVersion:
            inside = False
        if not inside:
            found.append((package, version, (low, high)))
    return found


def _installed(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def warn_on_untested_versions(installed=None):
    """One warning per package outside its tested range (the private hooks above may have moved there)."""
    for package, version, (low, high) in untested_versions(installed):
        tested = low if low == high else f"{low} to {high}"
        logger.warning("%s %s is installed, but this toolkit was tested with %s %s; its trainers override private "
                       "transformers methods (t5kit/train/private_api.py): run `make test`, or pip install '%s==%s'",
                       package, version, package, tested, package, high)
