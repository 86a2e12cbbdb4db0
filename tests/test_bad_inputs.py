"""Bad input across configs, data files, flags, launch configs, checkpoints and sweep files: each ends in exactly
one `error:` line on stderr, exit code 2, and a work folder byte-identical to before. The entry scripts run
in-process through flags.run_cli, the same path their `__main__` takes."""
import contextlib
import io
import json
from pathlib import Path

from absl.testing import absltest, parameterized

import fine_tune_t5
import flags
import pre_train_t5
import sweep
import train_tokenizer
from shared_data import require
from test_fine_tune_t5 import tiny_flags
from test_pre_train_t5 import snapshot, tiny_run_flags

REPO = Path(__file__).resolve().parents[1]
ENTRIES = {"pre_train_t5": pre_train_t5.main, "fine_tune_t5": fine_tune_t5.main, "sweep": sweep.main,
           "train_tokenizer": train_tokenizer.main}


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def pretrain(work, **overrides):
    return tiny_run_flags(str(work / "out"), str(require("gutenberg/austen-persuasion.txt")), **overrides)


def finetune(work, **overrides):
    return tiny_flags(str(work / "out"), **overrides)


T5_CONFIG = json.dumps({"model_type": "t5", "is_encoder_decoder": True, "d_model": 32, "d_ff": 64, "d_kv": 8,
                        "num_layers": 1, "num_heads": 2, "vocab_size": 32128})

# name -> (entry, argv builder given the work folder, expected message fragment)
CASES = {
    # config files
    "yaml_not_a_mapping": ("pre_train_t5", lambda w: [write(w / "c.yaml", "- a\n- b\n")], "must be a mapping"),
    "yaml_syntax": ("pre_train_t5", lambda w: [write(w / "c.yaml", "max_steps: [1\n")], "is not valid YAML"),
    "include_cycle": ("pre_train_t5", lambda w: [write(w / "a.yaml", "_include: [b.yaml]\n"),
                                                write(w / "b.yaml", "_include: [a.yaml]\n")][:1],
                      "_include cycle"),
    "unknown_yaml_key": ("pre_train_t5", lambda w: [write(w / "c.yaml", "learning_rat: 0.1\n")],
                         "did you mean 'learning_rate'"),
    "missing_config": ("fine_tune_t5", lambda w: [str(w / "nope.yaml")], "not found"),
    # flags
    "unknown_flag": ("pre_train_t5", lambda w: pretrain(w) + ["--noise_densty", "0.2"],
                     "did you mean '--noise_density'"),
    "bad_float": ("pre_train_t5", lambda w: pretrain(w, learning_rate="fast"), "invalid float value: 'fast'"),
    "noise_density": ("pre_train_t5", lambda w: pretrain(w, noise_density=1.5), "--noise_density=1.5 must be in"),
    "mean_span": ("pre_train_t5", lambda w: pretrain(w, mean_noise_span_length=0), "must be >= 1"),
    "unknown_preset": ("pre_train_t5", lambda w: pretrain(w, model_size="t5-xxxl"), "unknown --model_size"),
    "fp16_and_bf16": ("pre_train_t5", lambda w: pretrain(w, fp16=True, bf16=True), "both set; pick one"),
    "hub_token": ("fine_tune_t5", lambda w: finetune(w, hub_token="hf_x"), "--hub_token would be recorded"),
    "unknown_task": ("fine_tune_t5", lambda w: finetune(w, dataset_name="sst"), "did you mean 'sst2'"),
    "param_group_regex": ("pre_train_t5", lambda w: pretrain(w, param_group_lr="nothing_matches=1e-3"),
                          "matches no"),
    "nan_policy": ("pre_train_t5", lambda w: pretrain(w, nan_policy="ignore"), "--nan_policy='ignore'; choices"),
    "nan_policy_skip_under_deepspeed": ("pre_train_t5", lambda w: pretrain(
        w, nan_policy="skip", deepspeed=str(REPO / "zero_stage2_config.json")), "--nan_policy skip cannot undo"),
    "report_to": ("pre_train_t5", lambda w: pretrain(w, report_to="wandbb"), "--report_to 'wandbb' is not a tracker"),
    "batch_size_zero": ("pre_train_t5", lambda w: pretrain(w, per_device_train_batch_size=0),
                        "--per_device_train_batch_size=0 must be >= 1"),
    "accumulation_zero": ("pre_train_t5", lambda w: pretrain(w, gradient_accumulation_steps=0),
                          "--gradient_accumulation_steps=0 must be >= 1"),
    "negative_learning_rate": ("pre_train_t5", lambda w: pretrain(w, learning_rate=-1),
                               "--learning_rate=-1.0 must be >= 0"),
    "max_steps_zero": ("pre_train_t5", lambda w: pretrain(w, max_steps=0), "--max_steps=0: pass a number"),
    "no_epochs": ("pre_train_t5", lambda w: pretrain(w, max_steps=-1, num_train_epochs=0),
                  "--num_train_epochs=0.0 trains nothing"),
    "max_eval_samples_zero": ("pre_train_t5", lambda w: pretrain(w, max_eval_samples=0),
                              "--max_eval_samples=0 must be >= 1"),
    "tokenising_workers": ("pre_train_t5", lambda w: pretrain(w, preprocessing_num_workers=-1),
                           "--preprocessing_num_workers=-1 must be >= 1"),
    "generation_beams": ("fine_tune_t5", lambda w: finetune(w, generation_num_beams=0),
                         "--generation_num_beams=0 must be >= 1"),
    "eval_batch_size_zero": ("fine_tune_t5", lambda w: finetune(w, per_device_eval_batch_size=0),
                             "--per_device_eval_batch_size=0 must be >= 1"),
    "streaming_without_max_steps": ("pre_train_t5", lambda w: pretrain(w, streaming=True, max_steps=-1,
                                                                       max_eval_samples=8),
                                    "--streaming needs --max_steps N"),
    # data files
    "missing_data_file": ("pre_train_t5", lambda w: pretrain(w, train_files=[str(w / "none.txt")]), "not found"),
    "empty_data_file": ("pre_train_t5", lambda w: pretrain(w, train_files=[write(w / "e.txt", "")]), "is empty"),
    "validation_is_training": ("pre_train_t5", lambda w: pretrain(
        w, validation_files=[str(require("gutenberg/austen-persuasion.txt"))]), "is also a training file"),
    "corpus_too_short": ("pre_train_t5", lambda w: pretrain(w, train_files=[write(w / "s.txt", "Too short.\n")],
                                                            validation_files=[write(w / "v.txt", "Also.\n")]),
                         "shorter than one window"),
    "finetune_missing_column": ("fine_tune_t5", lambda w: finetune(
        w, data_dir=None, train_file=write(w / "t.jsonl", '{"text": "x", "label": 1}\n'),
        validation_file=write(w / "v.jsonl", '{"text": "y", "label": 0}\n')), "sentence"),
    # launch configs
    "deepspeed_not_json": ("pre_train_t5", lambda w: pretrain(w, deepspeed=write(w / "ds.json", "{stage")),
                           "is not valid JSON"),
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
    "evaluate_a_random_model": ("fine_tune_t5", lambda w: finetune(w, do_train=False),
                                "--do_train false evaluates an existing model"),
    "output_dir_under_a_file": ("pre_train_t5", lambda w: tiny_run_flags(
        str(Path(write(w / "notes.txt", "a file\n")) / "out"), str(require("gutenberg/austen-persuasion.txt"))),
        "notes.txt is a file; pass a folder path"),
    # checkpoints
    "resume_missing_checkpoint": ("pre_train_t5", lambda w: pretrain(w, resume_from_checkpoint=str(w / "ckpt")),
                                  "checkpoint"),
    # tokenizer
    "tokenizer_vocab": ("train_tokenizer", lambda w: ["--train_files", write(w / "t.txt", "text\n"),
                                                      "--output_dir", str(w / "tok"), "--vocab_size", "3"],
                        "vocab_size"),
    # sweep files
    "sweep_unknown_method": ("sweep", lambda w: [write(w / "s.yaml", "program: pre_train_t5.py\nmethod: genetic\n"
                                                   "metric: {name: eval/loss, goal: minimize}\n"
                                                   "parameters: {learning_rate: {values: [0.1]}}\n")], "genetic"),
    "sweep_min_above_max": ("sweep", lambda w: [write(w / "s.yaml", "program: pre_train_t5.py\nmethod: random\n"
                                                  "metric: {name: eval/loss, goal: minimize}\nparameters:\n"
                                                  "  learning_rate: {min: 0.1, max: 0.01}\n")], "min"),
}


class BadInputTest(parameterized.TestCase):

    @parameterized.named_parameters(*[(name, *case) for name, case in CASES.items()])
    def test_one_error_line_exit_2_nothing_touched(self, entry, build_argv, message):
        work = Path(self.create_tempdir().full_path)
        argv = build_argv(work)
        before = snapshot(work)
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), self.assertRaises(SystemExit) as exit_info:
            flags.run_cli(lambda: ENTRIES[entry](argv))
        self.assertEqual(exit_info.exception.code, 2)
        error_lines = [line for line in stderr.getvalue().splitlines() if line.startswith("error:")]
        self.assertLen(error_lines, 1, stderr.getvalue())
        self.assertIn(message, error_lines[0])
        self.assertEqual(snapshot(work), before)


if __name__ == "__main__":
    absltest.main()
