"""Step 3 of every entry script: the output folder checked, and the checkpoint to resume from (only complete
checkpoints count, checkpoint_manifest.py), refused where it holds another architecture."""
import json
from pathlib import Path

from t5kit.errors import UsageError
from t5kit.outputs.run_folder import ADAPTER_CONFIG_FILE, METRICS_FILE, check_output_dir
from t5kit.train import checkpoint_manifest

# What a checkpoint's weights must agree on with the model built now (T5-family config names).
ARCHITECTURE_KEYS = ("model_type", "d_model", "d_ff", "d_kv", "num_heads", "num_layers", "num_decoder_layers",
                     "vocab_size", "feed_forward_proj", "tie_word_embeddings", "encoder_attention_type")


def prepare_output_dir(training_args):
    """Step 3 of every entry script: refuses to clobber a previous run, then returns the checkpoint to resume
    from (None for a fresh start)."""
    check_output_dir(training_args.output_dir, training_args.overwrite_output_dir,
                     training_args.resume_from_checkpoint)
    # Only complete checkpoints count: 'auto' skips broken ones with a warning, a broken path is refused.
    checkpoint = checkpoint_manifest.resolve_checkpoint(training_args.output_dir,
                                                        training_args.resume_from_checkpoint)
    finished = Path(training_args.output_dir) / METRICS_FILE
    if checkpoint is None and finished.exists() and not training_args.overwrite_output_dir:
        # 'auto' found nothing to continue from, and starting afresh would replace a run that ended.
        raise UsageError(f"--resume_from_checkpoint {training_args.resume_from_checkpoint}: --output_dir "
                         f"{training_args.output_dir} holds a finished run ({METRICS_FILE}) and no complete "
                         "checkpoint to continue from; pass --overwrite_output_dir true to replace it, or choose "
                         "another --output_dir")
    return checkpoint


def check_checkpoint_fits(checkpoint, model):
    """Refuses to resume from a checkpoint saved by another architecture (HF would fail mid-load with a long
    size-mismatch trace, after config.yaml is written), or with adapters where this run has none, or the reverse."""
    holds_adapters = bool(checkpoint) and (Path(checkpoint) / ADAPTER_CONFIG_FILE).is_file()
    if checkpoint and holds_adapters != hasattr(model, "peft_config"):
        kind = "LoRA adapters" if holds_adapters else "a full model"
        raise UsageError(f"--resume_from_checkpoint {checkpoint} holds {kind}, but this run "
                         f"{'fine-tunes the full model' if holds_adapters else 'trains LoRA adapters'}; resume with "
                         "that run's flags (its config.yaml, --peft) or start a new --output_dir")
    saved_config = Path(checkpoint or "") / "config.json"
    if not checkpoint or not saved_config.is_file():
        return
    saved = json.loads(saved_config.read_text())
    built = model.config.to_dict()
    differ = [f"{key}={saved[key]} (this run: {built.get(key)})" for key in ARCHITECTURE_KEYS
              if key in saved and saved[key] != built.get(key)]
    if differ:
        raise UsageError(f"--resume_from_checkpoint {checkpoint} holds another model: {', '.join(differ)}; resume "
                         "with that run's flags (its config.yaml) or start a new --output_dir")
