"""Bad input across configs, data files, flags, launch configs, checkpoints and sweep files: each ends in exactly
one `error:` line on stderr, exit code 2, and a work folder byte-identical to before. The entry scripts run
in-process through cli.run_cli, the same path their `__main__` takes."""
import contextlib
import importlib
import io
import json
import os
import re
import sys
from pathlib import Path
from unittest import mock

from absl.testing import absltest, parameterized

from t5kit import cli
from t5kit.outputs import run_lock, wandb_server
from tests.helpers import (
    REPO,
    entry_main,
    file_size_limit,
    free_port,
    predict_flags,
    require,
    save_tiny_family_model,
    save_tiny_t5,
    snapshot,
    tiny_flags,
    tiny_run_flags,
    wandb_online_at,
    wandb_online_at_a_silent_server,
)


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def pretrain(work, **overrides):
    return tiny_run_flags(str(work / "out"), str(require("gutenberg/austen-persuasion.txt")), **overrides)


def finetune(work, **overrides):
    return tiny_flags(str(work / "out"), **overrides)


def predict(work, input_text="a line\n", input_name="in.txt", **overrides):
    """predict_t5.py on an input file written into the work folder; the model folder need not exist for the
    refusals that come before the model is loaded."""
    return predict_flags(str(work / "model"), write(work / input_name, input_text), str(work / "out.jsonl"),
                         **overrides)


def sni_checkout(work, tasks=(), train_tasks=None):
    """A folder with some parts of a natural-instructions checkout: task files (empty), a training split file."""
    root = work / "ni"
    root.mkdir()
    for name in tasks:
        write(root / "tasks" / f"{name}.json", "{}")
    if train_tasks is not None:
        write(root / "splits" / "default" / "train_tasks.txt", train_tasks)
    return str(root)


HELD = []  # run folder locks the cases hold as another run would; released after each case


def held_by_another_run(folder, argv):
    """Takes the lock of `folder` as a running run holds it (the same call as step 3, from this process through its
    own open file, which flock tells apart), then returns `argv`."""
    HELD.append(run_lock.take(folder))
    return argv


BERT_CONFIG = json.dumps({"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 1,
                          "num_attention_heads": 2, "intermediate_size": 64, "vocab_size": 100})
T5_CONFIG = json.dumps({"model_type": "t5", "is_encoder_decoder": True, "d_model": 32, "d_ff": 64, "d_kv": 8,
                        "num_layers": 1, "num_heads": 2, "vocab_size": 32128})
LONGT5_CONFIG = T5_CONFIG.replace('"t5"', '"longt5"')
CPU_WITHOUT_BF16 = {"float32", "int8", "int8_float32", "int16"}  # what ctranslate2 4.8 lists on a CPU (even with AMX)


def export(work, model="model", **flags):
    return ["--model_name_or_path", str(work / model), *[f"--{k}={v}" for k, v in flags.items()]]


def stale_export(work):
    """A CTranslate2 folder whose model.bin is not the one its record names."""
    write(work / "export/model.bin", "weights")
    write(work / "export/export_record.json", json.dumps({"export_sha256": "0" * 64, "quantization": "float32"}))
    return str(work / "export")


SILENT_SERVER_WAIT_S = 0.5  # a silent listener never answers: how long a run waits changes nothing else


@contextlib.contextmanager
def silent_server_short_wait():
    with wandb_online_at_a_silent_server(), \
            mock.patch.object(wandb_server, "WANDB_SERVER_TIMEOUT_S", SILENT_SERVER_WAIT_S):
        yield


# name -> (entry, argv builder given the work folder, expected message fragment[, environment of the run])
CASES = {
    # config files
    "yaml_not_a_mapping": ("pre_train_t5", lambda w: [write(w / "c.yaml", "- a\n- b\n")],
                           "c.yaml must be a mapping of flag: value, got a list"),
    "yaml_syntax": ("pre_train_t5", lambda w: [write(w / "c.yaml", "max_steps: [1\n")],
                    "c.yaml is not valid YAML: line 2, column 1: expected ',' or ']'"),
    "include_cycle": ("pre_train_t5", lambda w: [write(w / "a.yaml", "_include: [b.yaml]\n"),
                                                write(w / "b.yaml", "_include: [a.yaml]\n")][:1],
                      "_include cycle in config files: a.yaml -> b.yaml -> a.yaml"),
    "unknown_yaml_key": ("pre_train_t5", lambda w: [write(w / "c.yaml", "learning_rat: 0.1\n")],
                         "unknown key 'learning_rat' in {work}/c.yaml; did you mean 'learning_rate'?"),
    "missing_config": ("fine_tune_t5", lambda w: [str(w / "nope.yaml")], "nope.yaml not found; check the path"),
    # flags
    "unknown_flag": ("pre_train_t5", lambda w: pretrain(w) + ["--noise_densty", "0.2"],
                     "unknown flag '--noise_densty' in the command line; did you mean '--noise_density' or "
                     "'--denoisers'?"),
    "bad_float": ("pre_train_t5", lambda w: pretrain(w, learning_rate="fast"), "invalid float value: 'fast'"),
    "noise_density": ("pre_train_t5", lambda w: pretrain(w, noise_density=1.5),
                      "--noise_density=1.5 must be in (0, 1); the T5 paper uses 0.15"),
    "input_length_short": ("pre_train_t5", lambda w: pretrain(w, input_length=4),
                           "--input_length=4 is too short for span corruption; use >= 8 (T5: 512)"),
    "denoiser_span": ("pre_train_t5", lambda w: pretrain(
        w, objective="ul2",
        denoisers="[{paradigm: X, noise_density: 0.5, mean_noise_span_length: 0.5, proportion: 1}]"),
        "--denoisers item 1: mean_noise_span_length=0.5 must be >= 1 (tokens); the T5 paper uses 3"),
    "mean_span": ("pre_train_t5", lambda w: pretrain(w, mean_noise_span_length=0),
                  "--mean_noise_span_length=0.0 must be >= 1"),
    "unknown_preset": ("pre_train_t5", lambda w: pretrain(w, model_size="t5-xxxl"),
                       "--model_size='t5-xxxl' is not a valid choice; choices: t5-tiny, t5-mini"),
    "fp16_and_bf16": ("pre_train_t5", lambda w: pretrain(w, fp16=True, bf16=True), "both set; pick one"),
    "hub_token": ("fine_tune_t5", lambda w: finetune(w, hub_token="hf_x"), "--hub_token would be recorded"),
    "unknown_task": ("fine_tune_t5", lambda w: finetune(w, dataset_name="sst"),
                     "unknown task 'sst' for --benchmark glue; did you mean 'sst2'?"),
    "predict_unknown_task": ("predict_t5", lambda w: predict(w, task="sst"),
                             "--task 'sst' is no task of the registry; did you mean 'glue/sst2'?"),
    "param_group_regex": ("pre_train_t5", lambda w: pretrain(w, param_group_lr="nothing_matches=1e-3"),
                          "parameter 'shared.weight' matches no item"),
    "adamw_rms_scaling_with_adafactor": ("pre_train_t5", lambda w: pretrain(w, optim="adafactor",
                                                                           adamw_rms_scaling=True),
                                         "--adamw_rms_scaling true scales AdamW's step but --optim is adafactor"),
    "nan_policy": ("pre_train_t5", lambda w: pretrain(w, nan_policy="ignore"),
                   "--nan_policy='ignore' is not a valid choice; choices: stop, skip"),
    "negative_z_loss": ("pre_train_t5", lambda w: pretrain(w, z_loss=-1e-4),
                        "--z_loss=-0.0001 must be >= 0 (T5X uses 1e-4; 0 turns it off)"),
    "negative_z_loss_fine_tuning": ("fine_tune_t5", lambda w: finetune(w, z_loss=-1),
                                    "--z_loss=-1.0 must be >= 0"),
    "activation_dtype_without_bf16": ("pre_train_t5", lambda w: pretrain(w, activation_dtype="bfloat16"),
                                      "--activation_dtype bfloat16 casts the residual stream under bf16 autocast, "
                                      "which is off"),
    "activation_dtype_with_fp16": ("fine_tune_t5", lambda w: finetune(w, activation_dtype="bfloat16", fp16=True),
                                   "--activation_dtype bfloat16 with --fp16"),
    "loss_chunks_with_z_loss": ("pre_train_t5", lambda w: pretrain(w, loss_chunk_tokens=4096, z_loss=1e-4),
                                "never holds a step's full logits, which --z_loss reads"),
    "fp16_with_bf16": ("pre_train_t5", lambda w: pretrain(w, fp16=True, bf16=True),
                       "--bf16 and --fp16 are both set; pick one"),
    "fp16_with_eager_attention": ("pre_train_t5", lambda w: pretrain(w, fp16=True, attn_implementation="eager"),
                                  "--fp16 true with --attn_implementation eager"),
    "fp16_without_a_gpu": ("fine_tune_t5", lambda w: finetune(w, fp16=True, use_cpu=False),
                           "--fp16 true needs a GPU, or --use_cpu true for fp16 autocast on the CPU"),
    "predict_fp16_with_bf16": ("predict_t5", lambda w: predict(w, fp16=True, bf16=True),
                               "--fp16 and --bf16 are both set; pick one"),
    "predict_fp16_with_ctranslate2": ("predict_t5", lambda w: predict(w, fp16=True, backend="ctranslate2"),
                                      "--fp16 casts the torch model's weights; CTranslate2 takes --compute_type "
                                      "float16"),
    "activation_dtype_choice": ("pre_train_t5", lambda w: pretrain(w, activation_dtype="float16"),
                                "--activation_dtype='float16' is not a valid choice; did you mean 'bfloat16' or "
                                "'float32'?"),
    "lm_head_init": ("pre_train_t5", lambda w: pretrain(w, lm_head_init="mesh"),
                     "--lm_head_init='mesh' is not a valid choice; choices: t5x, hf"),
    "nan_policy_skip_under_deepspeed": ("pre_train_t5", lambda w: pretrain(
        w, nan_policy="skip", deepspeed=str(REPO / "zero_stage2_config.json")), "--nan_policy skip cannot undo"),
    "report_to": ("pre_train_t5", lambda w: pretrain(w, report_to="wandbb"), "--report_to 'wandbb' is not a tracker"),
    # a W&B server that does not answer, with W&B online: refused before anything is written, in seconds
    "wandb_server_refuses": ("pre_train_t5", lambda w: pretrain(w, report_to="wandb"),
                             "does not answer (connection refused; WANDB_MODE=online)", None, lambda: wandb_online_at(f"http://127.0.0.1:{free_port()}")),
    "wandb_server_silent": ("fine_tune_t5", lambda w: finetune(w, report_to="wandb"),
                            "does not answer (no answer in {timeout} s; WANDB_MODE=online)", None,
                            silent_server_short_wait),
    "batch_size_zero": ("pre_train_t5", lambda w: pretrain(w, per_device_train_batch_size=0),
                        "--per_device_train_batch_size=0 must be >= 1"),
    "accumulation_zero": ("pre_train_t5", lambda w: pretrain(w, gradient_accumulation_steps=0),
                          "--gradient_accumulation_steps=0 must be >= 1"),
    "negative_learning_rate": ("pre_train_t5", lambda w: pretrain(w, learning_rate=-1),
                               "--learning_rate=-1.0 must be >= 0"),
    "max_steps_zero": ("pre_train_t5", lambda w: pretrain(w, max_steps=0), "--max_steps=0: pass a number"),
    "save_steps_zero": ("pre_train_t5", lambda w: pretrain(w, save_strategy="steps", save_steps=0),
                        "--save_steps=0 with --save_strategy steps is no interval; pass a number of steps >= 1"),
    "eval_steps_negative": ("fine_tune_t5", lambda w: finetune(w, eval_strategy="steps", eval_steps=-2),
                            "--eval_steps=-2 with --eval_strategy steps is no interval"),
    "no_epochs": ("pre_train_t5", lambda w: pretrain(w, max_steps=-1, num_train_epochs=0),
                  "--num_train_epochs=0.0 trains nothing"),
    "max_eval_samples_zero": ("pre_train_t5", lambda w: pretrain(w, max_eval_samples=0),
                              "--max_eval_samples=0 must be >= 1"),
    "tokenising_workers": ("pre_train_t5", lambda w: pretrain(w, preprocessing_num_workers=-1),
                           "--preprocessing_num_workers=-1 must be >= 1"),
    "push_without_hub_model_id": ("pre_train_t5", lambda w: pretrain(w, push_to_hub=True),
                                  "--push_to_hub true needs --hub_model_id NAME"),
    "generation_beams": ("fine_tune_t5", lambda w: finetune(w, generation_num_beams=0),
                         "--generation_num_beams=0 must be >= 1"),
    "eval_batch_size_zero": ("fine_tune_t5", lambda w: finetune(w, per_device_eval_batch_size=0),
                             "--per_device_eval_batch_size=0 must be >= 1"),
    "document_separator": ("pre_train_t5", lambda w: pretrain(w, document_separator="newline"),
                           "--document_separator='newline' is not a valid choice; choices: eos, none"),
    "unknown_objective": ("pre_train_t5", lambda w: pretrain(w, objective="ul3"),
                          "--objective='ul3' is not a valid choice; did you mean 'ul2'?"),
    "unknown_denoiser_setting": ("pre_train_t5", lambda w: pretrain(
        w, objective="ul2", denoisers="[{paradigm: S, noise_densty: 0.25, proportion: 1}]"),
        "--denoisers item 1: unknown denoiser setting 'noise_densty'; did you mean 'noise_density'?"),
    "denoiser_proportions": ("pre_train_t5", lambda w: [write(w / "c.yaml", (
        "objective: ul2\ndenoisers:\n  - {paradigm: R, mean_noise_span_length: 3, noise_density: 0.15, "
        "proportion: 0.5}\n  - {paradigm: S, noise_density: 0.25, proportion: 0.4}\n")), *pretrain(w)],
        "--denoisers proportions sum to 0.9, not 1"),
    "mode_token_the_tokenizer_cannot_hold": ("pre_train_t5", lambda w: pretrain(
        w, objective="ul2", denoisers="[{paradigm: S, noise_density: 0.25, proportion: 1, mode_token: '</s>'}]"),
        "mode_token '</s>' is one of the tokenizer's own special tokens"),
    "train_on_a_diagnostic_task": ("fine_tune_t5", lambda w: finetune(w, dataset_name="ax"),
                                   "--do_train: glue/ax is only predicted, never trained on"),
    "flan_templates_for_a_task_flan_lacks": ("fine_tune_t5", lambda w: finetune(
        w, dataset_name="ax", instruction_templates="flan"),
        "--instruction_templates flan: FLAN has no templates for glue/ax; it formats glue/cola, glue/sst2,"),
    "flan_few_shot_larger_than_the_training_split": ("fine_tune_t5", lambda w: finetune(
        w, instruction_templates="flan", few_shot=40, max_train_samples=32),
        "--few_shot 40: glue/rte has 32 training rows to draw exemplars from (an example is never its own); "
        "pass --few_shot 31 or less"),
    "flan_copa_without_options": ("fine_tune_t5", lambda w: finetune(
        w, benchmark="super_glue", dataset_name="copa", instruction_templates="flan", instruction_options=False),
        "--instruction_templates flan for super_glue/copa needs FLAN's OPTIONS list"),
    "few_shot_without_templates": ("fine_tune_t5", lambda w: finetune(w, few_shot=2),
                                   "--few_shot is part of FLAN's format: pass --instruction_templates flan"),
    "streaming_without_max_steps": ("pre_train_t5", lambda w: pretrain(w, streaming=True, max_steps=-1,
                                                                       max_eval_samples=8),
                                    "--streaming needs --max_steps N"),
    "word_vectors_for_a_loaded_model": ("pre_train_t5", lambda w: pretrain(
        w, init_embeddings="word_vectors", model_name_or_path="google-t5/t5-small"),
        "--init_embeddings word_vectors starts a new model; drop it, or drop --model_name_or_path"),
    "word_vectors_streamed": ("pre_train_t5", lambda w: pretrain(w, init_embeddings="word_vectors", streaming=True),
                              "--init_embeddings word_vectors counts the whole training corpus; drop --streaming"),
    "packing_span_corruption": ("pre_train_t5", lambda w: pretrain(w, packing=True),
                                "--packing true with --objective span_corruption: span corruption is already exact"),
    "packing_streamed": ("pre_train_t5", lambda w: pretrain(w, objective="ul2", packing=True, streaming=True),
                         "--packing true with --streaming: packing places a whole epoch's windows"),
    "packing_longt5": ("pre_train_t5", lambda w: pretrain(w, objective="ul2", packing=True, model_name_or_path=(
        save_tiny_family_model(w / "longt5", "longt5_local", require("t5_spiece")))),
        "packed batches need a T5, mT5 or UMT5 model, not longt5"),
    "packing_window_without_packing": ("pre_train_t5", lambda w: pretrain(w, objective="ul2",
                                                                          packing_window_input_length=64),
                                       "--packing_window_input_length applies to --packing true"),
    "packing_window_longer_than_row": ("pre_train_t5", lambda w: pretrain(
        w, objective="prefix_lm", packing=True, input_length=64, packing_window_input_length=65),
        "--packing_window_input_length=65 must be in [8, --input_length=64]"),
    "config_overrides_unknown_key": ("pre_train_t5", lambda w: pretrain(w, config_overrides="num_layer=4"),
                                     "T5Config has no setting 'num_layer'; did you mean 'num_layers'"),
    "lora_target_matches_nothing": ("fine_tune_t5", lambda w: finetune(
        w, model_name_or_path=save_tiny_t5(w / "base"), peft="lora", lora_target_modules="q,vv"),
        "--lora_target_modules 'vv' matches no layer of the model"),
    "lora_on_a_random_init": ("fine_tune_t5", lambda w: finetune(w, peft="lora"),
                              "--peft lora adapts an existing model: pass --model_name_or_path"),
    "lora_with_zero3": ("fine_tune_t5", lambda w: finetune(
        w, peft="lora", model_name_or_path="google-t5/t5-small", deepspeed=str(REPO / "zero_stage3_config.json")),
        "--peft lora with DeepSpeed ZeRO-3 is not supported here"),
    # data files
    "missing_data_file": ("pre_train_t5", lambda w: pretrain(w, train_files=[str(w / "none.txt")]),
                          "--train_files: file {work}/none.txt not found"),
    "empty_data_file": ("pre_train_t5", lambda w: pretrain(w, train_files=[write(w / "e.txt", "")]),
                        "--train_files: file {work}/e.txt is empty"),
    "validation_is_training": ("pre_train_t5", lambda w: pretrain(
        w, validation_files=[str(require("gutenberg/austen-persuasion.txt"))]), "is also a training file"),
    "corpus_too_short": ("pre_train_t5", lambda w: pretrain(w, train_files=[write(w / "s.txt", "Too short.\n")],
                                                            validation_files=[write(w / "v.txt", "Also.\n")]),
                         "shorter than one window"),
    "finetune_missing_column": ("fine_tune_t5", lambda w: finetune(
        w, data_dir=None, train_file=write(w / "t.jsonl", '{"text": "x", "label": 1}\n'),
        validation_file=write(w / "v.jsonl", '{"text": "y", "label": 0}\n')),
        "t.jsonl lacks column(s) sentence1, sentence2 of task glue/rte"),
    "submission_without_idx": ("fine_tune_t5", lambda w: finetune(
        w, benchmark="super_glue", data_dir=None, do_predict=True,
        train_file=write(w / "t.jsonl", '{"premise": "A man eats.", "hypothesis": "A man eats.", "label": 0}\n'),
        validation_file=str(w / "t.jsonl"),
        test_file=write(w / "test.jsonl", '{"premise": "A man eats.", "hypothesis": "Nobody eats."}\n')),
        "test.jsonl line 1 has no idx (or index), which the super_glue server matches predictions by"),
    "sni_not_a_checkout": ("fine_tune_t5", lambda w: finetune(w, benchmark="sni", dataset_name=None,
                                                              data_dir=[sni_checkout(w)]),
                           "--data_dir {work}/ni is not a natural-instructions checkout: {work}/ni/tasks/ is missing"),
    "sni_split_file_missing": ("fine_tune_t5", lambda w: finetune(w, benchmark="sni", dataset_name=None,
                                                                  data_dir=[sni_checkout(w, tasks=["task1_a"])]),
                               "the split file {work}/ni/splits/default/train_tasks.txt is missing"),
    "sni_task_without_file": ("fine_tune_t5", lambda w: finetune(
        w, benchmark="sni", dataset_name=None,
        data_dir=[sni_checkout(w, tasks=["task1_a"], train_tasks="task1_a\ntask2_missing\n")]),
        "train_tasks.txt line 2 names task task2_missing, which has no task file {work}/ni/tasks/task2_missing.json"),
    "axg_rows_not_paired": ("fine_tune_t5", lambda w: finetune(
        w, dataset_name=None, tasks="super_glue/rte,super_glue/axg", do_predict=True, data_dir=[write(
            w / "sg" / "AX-g" / "AX-g.jsonl",
            '{"premise": "He ate.", "hypothesis": "A man ate.", "idx": 0, "label": "entailment"}\n'
            '{"premise": "She slept.", "hypothesis": "A woman slept.", "idx": 1, "label": "entailment"}\n'
        )[:-len("/AX-g.jsonl")], str(require("superglue/RTE"))]),
        "AX-g rows idx 0 and 1 should be one Winogender pair (idx 2k, 2k + 1, the same hypothesis) but their "
        "hypotheses differ"),
    "predict_empty_input": ("predict_t5", lambda w: predict(w, input_text=""), "--input_file {work}/in.txt is empty"),
    "predict_missing_column": ("predict_t5", lambda w: predict(
        w, input_text='{"sentence_1": "a", "sentence2": "b"}\n', input_name="in.jsonl", task="rte"),
        "has no column 'sentence1' (task glue/rte's column); did you mean 'sentence_1'"),
    # launch configs
    "fsdp_on_cpu": ("pre_train_t5", lambda w: pretrain(w), "the FSDP config needs GPUs: on CPU processes",
                    {"ACCELERATE_USE_FSDP": "true", "FSDP_VERSION": "2"}),
    "fsdp_set_twice": ("pre_train_t5", lambda w: pretrain(w, fsdp="full_shard"), "FSDP is set twice",
                       {"ACCELERATE_USE_FSDP": "true"}),
    "deepspeed_not_json": ("pre_train_t5", lambda w: pretrain(w, deepspeed=write(w / "ds.json", "{stage")),
                           "--deepspeed file {work}/ds.json is not valid JSON: line 1, column 2: Expecting property"),
    "deepspeed_not_a_mapping": ("pre_train_t5", lambda w: pretrain(w, deepspeed=write(w / "ds.json", "[2]")),
                                "ds.json must be a mapping of DeepSpeed settings (a JSON object), got a list"),
    "deepspeed_mismatch": ("pre_train_t5", lambda w: pretrain(w, deepspeed=write(
        w / "ds.json", json.dumps({"gradient_accumulation_steps": 8}))), "set it to \"auto\""),
    "deepspeed_stage": ("pre_train_t5", lambda w: pretrain(w, deepspeed=write(
        w / "ds.json", json.dumps({"zero_optimization": {"stage": 5}}))), "unknown ZeRO stage 5"),
    "accelerator_config_missing": ("pre_train_t5", lambda w: pretrain(w, accelerator_config=str(w / "acc.json")),
                                   "acc.json: no such JSON file"),
    # models and tokenizers
    "tokenizer_folder_without_tokenizer": ("pre_train_t5", lambda w: pretrain(
        w, tokenizer_name_or_path=str(Path(write(w / "tok/notes.txt", "not a tokenizer\n")).parent)),
        "holds no tokenizer"),
    "model_without_weights": ("pre_train_t5", lambda w: pretrain(
        w, model_name_or_path=str(Path(write(w / "m/config.json", T5_CONFIG)).parent)), "cannot load the weights"),
    "model_corrupt_weights": ("pre_train_t5", lambda w: pretrain(
        w, model_name_or_path=[write(w / "m/model.safetensors", "garbage" * 20),
                               str(Path(write(w / "m/config.json", T5_CONFIG)).parent)][1]),
        "cannot load the weights"),
    "predict_model_without_tokenizer": ("predict_t5", lambda w: [write(w / "model/config.json", T5_CONFIG),
                                                                 *predict(w, task="sst2")][1:],
                                        "--model_name_or_path {work}/model holds no tokenizer"),
    "predict_model_folder_missing": ("predict_t5", lambda w: predict(w, task="sst2"),
                                     "--model_name_or_path {work}/model: no such folder; pass a saved model folder"),
    "evaluate_a_random_model": ("fine_tune_t5", lambda w: finetune(w, do_train=False),
                                "--do_train false evaluates an existing model"),
    "output_dir_under_a_file": ("pre_train_t5", lambda w: tiny_run_flags(
        str(Path(write(w / "notes.txt", "a file\n")) / "out"), str(require("gutenberg/austen-persuasion.txt"))),
        "notes.txt is a file; pass a folder path"),
    "output_dir_held_by_another_run": ("pre_train_t5", lambda w: held_by_another_run(
        w / "out", pretrain(w, resume_from_checkpoint="auto")),
        "--output_dir {work}/out is in use by another run (host "),
    # checkpoints
    "predict_output_exists": ("predict_t5", lambda w: [write(w / "out.jsonl", "{}\n"), *predict(w)][1:],
                              "--output_file {work}/out.jsonl exists; pass --overwrite true to replace it"),
    "resume_missing_checkpoint": ("pre_train_t5", lambda w: pretrain(w, resume_from_checkpoint=str(w / "ckpt")),
                                  "ckpt is not a checkpoint folder; pass 'auto'"),
    # tokenizer
    "tokenizer_vocab": ("train_tokenizer", lambda w: ["--train_files", write(w / "t.txt", "text\n"),
                                                      "--output_dir", str(w / "tok"), "--vocab_size", "3"],
                        "--vocab_size 3 is too small; use at least 97"),
    # sweep files
    "sweep_unknown_method": ("sweep", lambda w: [write(w / "s.yaml", "program: pre_train_t5.py\nmethod: genetic\n"
                                                   "metric: {name: eval/loss, goal: minimize}\n"
                                                   "parameters: {learning_rate: {values: [0.1]}}\n")],
                             "unknown method 'genetic'; choices: grid, random, bayes"),
    "sweep_not_a_mapping": ("sweep", lambda w: [write(w / "s.yaml", "- program: pre_train_t5.py\n")],
                            "sweep file {work}/s.yaml must be a mapping of program, method, metric and parameters, "
                            "got a list"),
    "sweep_min_above_max": ("sweep", lambda w: [write(w / "s.yaml", "program: pre_train_t5.py\nmethod: random\n"
                                                  "metric: {name: eval/loss, goal: minimize}\nparameters:\n"
                                                  "  learning_rate: {min: 0.1, max: 0.01}\n")],
                            "parameter 'learning_rate': min 0.1 > max 0.01"),
    # make data (a helper script: scripts/NAME)
    "fetch_unknown_task": ("scripts/fetch_data", lambda w: ["--tasks", "glue/sst", "--output_dir", str(w / "data")],
                           "--tasks: unknown source 'glue/sst'; did you mean 'glue/sst2'"),
    # bad input found while running (before anything is written)
    "latin1_corpus": ("pre_train_t5", lambda w: pretrain(w, train_files=[
        str(require("gutenberg/austen-persuasion.txt")), str(require("gutenberg/chesterton-ball.txt"))]),
        "chesterton-ball.txt: not utf-8 text (byte"),
    "model_of_another_architecture": ("fine_tune_t5", lambda w: finetune(
        w, model_size=None, tokenizer_name_or_path=None,
        model_name_or_path=str(Path(write(w / "bert/config.json", BERT_CONFIG)).parent)),
        "is a bert model (not an encoder-decoder), not a T5 model"),
    "eval_strategy_no_with_best_model": ("fine_tune_t5", lambda w: finetune(w, eval_strategy="no"),
                                         "requires the save and eval strategy to match, except when "
                                         "--save_strategy=\"best\", but found - Evaluation strategy: "
                                         "IntervalStrategy.NO - Save strategy: SaveStrategy.STEPS"),
    # CTranslate2 export and backend (export_t5.py, predict_t5.py --backend ctranslate2)
    "export_lora_unmerged": ("export_t5", lambda w: [write(w / "lora/adapter_config.json", "{}"),
                                                     *export(w, "lora")][1:],
                             "--model_name_or_path {work}/lora holds LoRA adapters, not a whole model; merge them "
                             "first: fine_tune_t5.py --peft lora --merge_adapters true"),
    "export_unsupported_family": ("export_t5", lambda w: [write(w / "model/config.json", LONGT5_CONFIG),
                                                          *export(w)][1:],
                                  "is a longt5 model, which CTranslate2's converter does not convert; it converts "
                                  "t5, mt5, umt5"),
    "export_bfloat16_without_hardware": (
        "export_t5", lambda w: [write(w / "model/config.json", T5_CONFIG), *export(w, quantization="bfloat16")][1:],
        "--quantization bfloat16: this CPU cannot compute it in CTranslate2; it computes float32, int16, int8, "
        "int8_float32", None, lambda: mock.patch("ctranslate2.get_supported_compute_types",
                                                 return_value=CPU_WITHOUT_BF16)),
    "export_output_exists": ("export_t5", lambda w: [write(w / "model/config.json", T5_CONFIG),
                                                     write(w / "model/ctranslate2/model.bin", "x"), *export(w)][2:],
                             "--output_dir {work}/model/ctranslate2 exists; pass --overwrite_output_dir true to "
                             "replace it"),
    "predict_export_record_mismatch": ("predict_t5", lambda w: predict(
        w, task="sst2", backend="ctranslate2", model_name_or_path=stale_export(w)),
        "--model_name_or_path {work}/export: its model.bin is not the one export_record.json records; re-export it"),
    "predict_compute_type_without_hardware": ("predict_t5", lambda w: predict(
        w, task="sst2", backend="ctranslate2", compute_type="float16"),
        "--compute_type float16: this CPU cannot compute it in CTranslate2"),
    "predict_ctranslate2_not_installed": (
        "predict_t5", lambda w: predict(w, task="sst2", backend="ctranslate2"),
        "the ctranslate2 backend needs the ctranslate2 package, which is not installed; pip install "
        "'ctranslate2>=4.5,<5'", None, lambda: mock.patch.dict(sys.modules, {"ctranslate2": None})),
    "predict_ctranslate2_model_folder_missing": ("predict_t5", lambda w: predict(w, task="sst2", backend="ctranslate2"),
                                                 "--model_name_or_path {work}/model: no such folder"),
    "export_model_folder_missing": ("export_t5", lambda w: export(w), "--model_name_or_path {work}/model: no such "
                                                                      "folder"),
    # a file-size limit (RLIMIT_FSIZE) refuses the export's weights: the temporary folder goes, nothing else changes
    "export_refused_by_the_filesystem": ("export_t5", lambda w: [save_tiny_t5(w / "model"), *export(w)][1:],
                                         "the CTranslate2 export could not be saved: File too large (it needs about",
                                         None,
                                         lambda: file_size_limit(2**20)),
    "unset_variable_in_output_dir": ("pre_train_t5", lambda w: tiny_run_flags(
        str(w / "runs" / "${T5_TEST_UNSET_RUN_ID}"), str(require("gutenberg/austen-persuasion.txt"))),
        "names $T5_TEST_UNSET_RUN_ID, which is not set in the environment"),
}


def script_main(entry):
    """The main(argv) of an entry script, or of a helper script under scripts/ ("scripts/fetch_data")."""
    return importlib.import_module(entry.replace("/", ".")).main if entry.startswith("scripts/") else entry_main(entry)


class BadInputTest(parameterized.TestCase):

    @parameterized.named_parameters(*[(name, *case) for name, case in CASES.items()])
    def test_one_error_line_exit_2_nothing_touched(self, entry, build_argv, message, env=None, patch=None):
        work = Path(self.create_tempdir().full_path)
        self.addCleanup(lambda: [run_lock.release(HELD.pop()) for _ in list(HELD)])
        argv = build_argv(work)
        before = snapshot(work)
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), self.assertRaises(SystemExit) as exit_info, \
                mock.patch.dict(os.environ, env or {}), (patch or contextlib.nullcontext)():
            cli.run_cli(lambda: script_main(entry)(argv))
        self.assertEqual(exit_info.exception.code, 2)
        error_lines = [line for line in stderr.getvalue().splitlines() if line.startswith("error:")]
        self.assertLen(error_lines, 1, stderr.getvalue())
        self.assertIn(message.format(work=work, timeout=f"{SILENT_SERVER_WAIT_S:g}"), error_lines[0])
        self.assertEqual(snapshot(work), before)


class CatalogueTest(absltest.TestCase):
    """docs/errors.md lists exactly these cases, each with the fragment its test matches."""

    def test_the_errors_page_lists_every_case_with_its_message(self):
        rows = {match.group(1): match.group(0) for match in
                re.finditer(r"^\| `(\w+)` \|.*\|$", (REPO / "docs" / "errors.md").read_text(), flags=re.M)}
        self.assertEqual(sorted(rows), sorted(CASES))
        for name, (entry, _, fragment, *_) in CASES.items():
            self.assertIn(f"| {entry}.py |", rows[name])
            # the page shows the wait a run has (5 s), the test a shorter one (silent_server_short_wait)
            shown = fragment.format(work="<work>", timeout=f"{wandb_server.WANDB_SERVER_TIMEOUT_S:g}")
            self.assertIn(f"`{shown}`", rows[name], name)


if __name__ == "__main__":
    absltest.main()
