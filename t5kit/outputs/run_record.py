"""The run record: what OUTPUT_DIR/config.yaml and the W&B run config hold.

    record = run_record.flag_values(flags)               # step 1: every flag as validated, every default filled
    derived = run_record.derived_values(training_args, tokens_per_example, num_parameters, dropout_rate, ...)
    run_record.write_run_record(output_dir, {**record, parsing.DERIVED_KEY: derived})
    record, trainer_args = run_record.start_run_outputs(training_args, record, derived, checkpoint)   # step 8

The flags come from the validated dataclasses (after every __post_init__ filled its defaults), never from the
command line as typed, and nothing changes a flag after the record is taken. `derived:` holds the numbers that
follow from the flags and the model (span shapes, global batch, tokens per optimizer step, precision, versions);
loading the file as a config ignores it, so `python ENTRY.py OUTPUT_DIR/config.yaml` reruns the run.
"""
import dataclasses
import enum
import importlib.metadata
import platform
from pathlib import Path

from t5kit.config.parsing import DERIVED_KEY, UNSAVED_KEYS
from t5kit.outputs import hub_upload, run_logging
from t5kit.outputs.atomic_files import write_yaml
from t5kit.outputs.run_folder import CONFIG_FILE

VERSIONED_PACKAGES = ("torch", "transformers", "accelerate", "deepspeed", "datasets")


def plain(value):
    """A YAML-safe copy of a flag value: enums become their value, paths strings, nested containers plain."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    return value


def flag_values(flags) -> dict:
    """Every init field of the validated flag dataclasses, in their order: HF's arguments through their own
    to_dict (enums, AcceleratorConfig, GenerationConfig as plain values), ours as they are. Secrets and per-process
    values (parsing.UNSAVED_KEYS) are left out."""
    record = {}
    for instance in flags:
        values = instance.to_dict() if hasattr(instance, "to_dict") else {
            f.name: getattr(instance, f.name) for f in dataclasses.fields(instance) if f.init}
        record.update({key: plain(value) for key, value in values.items() if key not in UNSAVED_KEYS})
    return record


def package_versions(packages=VERSIONED_PACKAGES) -> dict:
    """Python's version and each package's (None where it is not installed)."""
    versions = {"python": platform.python_version()}
    for package in packages:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def precision(training_args) -> str:
    return "bf16" if training_args.bf16 else "fp16" if training_args.fp16 else "fp32"


def derived_values(training_args, tokens_per_example, num_parameters, dropout_rate=None, **span_shapes) -> dict:
    """The numbers that follow from the flags and the model, computed once: the global batch (per-device batch x
    gradient accumulation x world size) and the tokens per optimizer step it carries, precision, parameters, the
    dropout rate the model trains with (--dropout_rate, or the loaded model's own), the span shapes of
    pre-training (tokens_length, input_length, target_length), package versions."""
    global_batch = (training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps
                    * training_args.world_size)
    return {
        **span_shapes,
        "world_size": training_args.world_size,
        "global_batch_size": global_batch,
        "tokens_per_example": tokens_per_example,
        "tokens_per_optimizer_step": round(global_batch * tokens_per_example),
        "precision": precision(training_args),
        "parameters": num_parameters,
        "dropout_rate": dropout_rate,
        "versions": package_versions(),
    }


def write_run_record(output_dir, record):
    """Writes config.yaml atomically; returns its path."""
    path = Path(output_dir) / CONFIG_FILE
    write_yaml(path, record)
    return path


def start_run_outputs(training_args, record, derived, checkpoint):
    """Writes OUTPUT_DIR/config.yaml (rank 0: the flags and the derived values) and opens out.log (appending after a
    boundary line when resuming from `checkpoint`). Returns the complete record (what the W&B config gets) and the
    trainer's copy of the arguments, HF's own push off: ours runs once, after the local save (hub_upload.py says
    why)."""
    record = {**record, DERIVED_KEY: derived}
    if training_args.should_save:
        write_run_record(training_args.output_dir, record)
    run_logging.open_run_log(training_args, checkpoint)
    return record, hub_upload.trainer_arguments(training_args)
