"""--push_to_hub true --hub_model_id NAME: the finished run folder uploaded to the Hugging Face hub, once, at the end.

    trainer = Trainer(args=hub_upload.trainer_arguments(training_args), ...)   # step 8: HF's own push stays off
    hub_upload.push_run_folder(training_args, commit_message)                   # step 9, after the local save

Why our code pushes and not HF's Trainer: with push_to_hub on, Trainer.__init__ creates the repo (a network call
before any training, which fails offline or without a token and loses nothing but time), and every save pushes
in the background while training. Here the Trainer gets a copy of the arguments with push_to_hub off (config.yaml
keeps the flag as given), and the push happens once, after the model, card and metrics are on disk: a missing
token or an unreachable hub is one `error:` line (exit code 2) and the run folder stays whole.

What is uploaded: the final model and tokenizer, README.md (the card), config.yaml, metrics.json and
loss_curve.png, and ctranslate2/ where export_t5.py put an export (a folder pushed again after exporting;
export_t5.py --push_to_hub uploads the export alone, as ctranslate2/ in the repo: push_export_folder).
--hub_strategy checkpoint adds the newest checkpoint-N/ folder, all_checkpoints every one (under their own names,
so `--resume_from_checkpoint auto` works on a download); end and every_save (HF's default) add none. out.log and
eval_log.jsonl stay local (they hold paths and host names). The token comes from HF_TOKEN only (--hub_token is
refused: it would be recorded), never from a cached `hf auth login`.
"""
import copy
import logging
import os
from pathlib import Path

from huggingface_hub import HfApi
from huggingface_hub.errors import HTTPError

from t5kit.errors import UsageError
from t5kit.model.ctranslate2_export import EXPORT_DIR, RECORD_FILE
from t5kit.outputs.run_folder import CONFIG_FILE, LOSS_CURVE_FILE, METRICS_FILE, MODEL_CARD_FILE, list_checkpoints
from t5kit.outputs.run_logging import mask_secrets, secret_values

logger = logging.getLogger(__name__)

TOKEN_ENV = "HF_TOKEN"
MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors", "model-*.safetensors",
               "model.safetensors.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "spiece.model")
RUN_FILES = (MODEL_CARD_FILE, CONFIG_FILE, METRICS_FILE, LOSS_CURVE_FILE)
CHECKPOINT_STRATEGIES = ("checkpoint", "all_checkpoints")
# Never uploaded, whatever a pattern matches: HF's staging folders, our atomic-write temporaries.
IGNORED = (".*", "**/.*", "*.tmp")


def trainer_arguments(training_args):
    """The Trainer's own copy of the arguments, with HF's push off (see the module docstring)."""
    if not training_args.push_to_hub:
        return training_args
    args = copy.copy(training_args)
    args.push_to_hub = False
    return args


def hub_strategy(training_args) -> str:
    return getattr(training_args.hub_strategy, "value", training_args.hub_strategy)


def warn_if_no_token(training_args):
    """At start: the push at the end will fail; the run is still worth doing (it is saved locally)."""
    if training_args.push_to_hub and training_args.should_save and not os.environ.get(TOKEN_ENV):
        logger.warning("--push_to_hub true but %s is not set: the run is saved locally and the push at the end will "
                       "fail; set %s to a write token before the run ends", TOKEN_ENV, TOKEN_ENV)


def checkpoint_folders(output_dir, strategy) -> list:
    """The checkpoint folders --hub_strategy uploads: none, the newest, or all (by step)."""
    if strategy not in CHECKPOINT_STRATEGIES:
        return []
    names = [path.name for path in list_checkpoints(output_dir)]
    return names[-1:] if strategy == "checkpoint" else names


def upload_patterns(output_dir, strategy) -> list:
    """allow_patterns for upload_folder: the run's files plus the checkpoint folders the strategy asks for."""
    export = [f"{EXPORT_DIR}/*"] if (Path(output_dir) / EXPORT_DIR / RECORD_FILE).is_file() else []
    return [*MODEL_FILES, *TOKENIZER_FILES, *RUN_FILES, *export,
            *(f"{name}/*" for name in checkpoint_folders(output_dir, strategy))]


def retry_hint(repo_id, output_dir) -> str:
    return (f"the run is saved in {output_dir}; upload it later with `{TOKEN_ENV}=... hf upload {repo_id} "
            f"{output_dir} --exclude 'checkpoint-*' --exclude out.log`")


def push_run_folder(training_args, commit_message):
    """Creates the repo (if needed) and uploads the run folder in one commit; returns the commit info. Call on the
    process that saves, after every file is written. Raises UsageError on a missing token or a failed upload."""
    repo_id, out = training_args.hub_model_id, training_args.output_dir
    token = os.environ.get(TOKEN_ENV)
    if not token:
        raise UsageError(f"--push_to_hub: {TOKEN_ENV} is not set, so nothing was uploaded to {repo_id}; "
                         f"{retry_hint(repo_id, out)}")
    return upload(token, repo_id, out, retry_hint(repo_id, out), training_args.hub_private_repo,
                  commit_message=commit_message, revision=training_args.hub_revision,
                  allow_patterns=upload_patterns(out, hub_strategy(training_args)))


def push_export_folder(folder, repo_id, private=None):
    """export_t5.py --push_to_hub: the export folder uploaded as ctranslate2/ into repo_id (a run's repo: beside the
    model it was made from). Raises UsageError on a missing token or a failed upload; the export stays whole."""
    hint = f"the export is saved in {folder}; upload it later with `{TOKEN_ENV}=... hf upload {repo_id} {folder} " \
           f"{EXPORT_DIR}`"
    token = os.environ.get(TOKEN_ENV)
    if not token:
        raise UsageError(f"--push_to_hub: {TOKEN_ENV} is not set, so nothing was uploaded to {repo_id}; {hint}")
    return upload(token, repo_id, str(folder), hint, private, path_in_repo=EXPORT_DIR,
                  commit_message=f"CTranslate2 export ({EXPORT_DIR}/)")


def upload(token, repo_id, folder, hint, private, **upload_kwargs):
    """Creates the repo (if needed) and uploads `folder` in one commit; a failure is one UsageError with `hint`."""
    api = HfApi(token=token)
    try:
        repo = api.create_repo(repo_id, private=private, exist_ok=True)
        commit = api.upload_folder(repo_id=repo.repo_id, folder_path=folder, ignore_patterns=list(IGNORED),
                                   **upload_kwargs)
    except (HTTPError, OSError) as err:  # offline mode, no network, a rejected token or repo name
        reason = mask_secrets(" ".join(str(err).split()), secret_values()) or type(err).__name__
        raise UsageError(f"--push_to_hub: the upload to {repo_id} failed ({reason}); {hint}") from None
    logger.info("pushed %s to %s", folder, getattr(commit, "commit_url", repo_id))
    return commit
