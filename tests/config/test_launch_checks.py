"""config/launch_checks.py + precision flags: DeepSpeed/accelerate configs may not contradict our flags."""
import json
import os
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

from absl.testing import absltest, parameterized

from t5kit.config import checks, parsing
from t5kit.config.arguments import T5TrainingArguments
from t5kit.errors import UsageError
from tests.helpers import REPO, training_args

SHIPPED_DEEPSPEED_CONFIGS = ("zero_stage2_config.json", "zero_stage2_offload_config.json", "zero_stage3_config.json")


class DeepSpeedConfigTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)

    def write_config(self, config):
        path = self.dir / "ds.json"
        path.write_text(json.dumps(config) if isinstance(config, dict) else config)
        return str(path)

    @parameterized.parameters(*SHIPPED_DEEPSPEED_CONFIGS)
    def test_shipped_configs_leave_every_flag_value_auto(self, name):
        from t5kit.config import launch_checks
        config = json.loads((REPO / name).read_text())
        args = training_args()
        for key in launch_checks.flag_values(args):
            self.assertIn(launch_checks.lookup(config, key), ("auto",), f"{name}: {key}")
        self.assertIn(config["zero_optimization"]["stage"], (2, 3))

    @parameterized.named_parameters(
        ("micro_batch", {"train_micro_batch_size_per_gpu": 16}, "train_micro_batch_size_per_gpu=16 but "
                                                                "--per_device_train_batch_size is 8"),
        ("accumulation", {"gradient_accumulation_steps": 4}, "gradient_accumulation_steps=4 but "
                                                             "--gradient_accumulation_steps is 1"),
        ("global_batch", {"train_batch_size": 64}, "train_batch_size=64 but per-device batch x accumulation x "
                                                   "world size is 8"),
        ("clipping", {"gradient_clipping": 0.5}, "gradient_clipping=0.5 but --max_grad_norm is 1.0"),
        ("learning_rate", {"optimizer": {"type": "AdamW", "params": {"lr": 0.1}}},
         "optimizer.params.lr=0.1 but --learning_rate is 5e-05"),
        ("betas", {"optimizer": {"type": "AdamW", "params": {"betas": [0.8, 0.99]}}}, "optimizer.params.betas"),
        ("warmup", {"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 500}}},
         "scheduler.params.warmup_num_steps=500 but --warmup_steps is 0"),
        ("precision", {"bf16": {"enabled": True}}, "bf16.enabled=True but --bf16 is False"),
    )
    def test_concrete_value_that_disagrees_is_refused_naming_both_places(self, config, message):
        path = self.write_config(config)
        with self.assertRaisesRegex(UsageError, f"--deepspeed {path} sets {message}.*\"auto\""):
            training_args("--deepspeed", path)

    def test_concrete_value_that_agrees_is_accepted(self):
        from t5kit.config import launch_checks
        config = {"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2, "gradient_clipping": 1.0,
                  "train_batch_size": 16, "zero_optimization": {"stage": 2}}
        args = training_args("--gradient_accumulation_steps", "2")
        launch_checks.check_deepspeed_agrees(config, args, "ds.json")  # raises UsageError on a disagreement
        # Accepted because each concrete value agrees, not because it went unread: doubling any one is refused.
        for key in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "gradient_clipping",
                    "train_batch_size"):
            with self.subTest(key), self.assertRaisesRegex(UsageError, f"ds.json sets {key}={config[key] * 2}"):
                launch_checks.check_deepspeed_agrees({**config, key: config[key] * 2}, args, "ds.json")

    @parameterized.named_parameters(
        ("not_json", "{stage: 2", r"--deepspeed file .*ds.json is not valid JSON: line 1, column 2: Expecting property "
                                  "name enclosed in double quotes$"),
        ("not_object", "[1, 2]", r"ds.json must be a mapping of DeepSpeed settings \(a JSON object\), got a list$"),
        ("unknown_stage", {"zero_optimization": {"stage": 4}}, "unknown ZeRO stage 4 .*use one of 0, 1, 2, 3"),
    )
    def test_bad_deepspeed_file(self, config, message):
        with self.assertRaisesRegex(UsageError, message):
            training_args("--deepspeed", self.write_config(config))

    def test_missing_deepspeed_file(self):
        with self.assertRaisesRegex(UsageError, "^--deepspeed file nope.json not found; pass a DeepSpeed JSON"):
            training_args("--deepspeed", "nope.json")

    @parameterized.named_parameters(("param_group_lr", ["--param_group_lr", ".*=1e-3"]),
                                    ("adamw_rms_scaling", ["--adamw_rms_scaling", "true"]))
    def test_optimizer_section_conflicts_with_our_optimizer_flags(self, flags):
        path = self.write_config({"optimizer": {"type": "AdamW", "params": {"lr": "auto"}}})
        with self.assertRaisesRegex(UsageError, f"defines an optimizer, which would ignore {flags[0]}"):
            training_args("--deepspeed", path, *flags)

    def test_deepspeed_under_plain_python_without_mpi4py_is_refused(self):
        env = {name: value for name, value in os.environ.items() if name != "LOCAL_RANK"}
        with mock.patch.dict(os.environ, env, clear=True), \
                mock.patch("importlib.util.find_spec", return_value=None) as find_spec, \
                self.assertRaisesRegex(UsageError, "--deepspeed needs a launcher: run `deepspeed --num_gpus N"):
            training_args("--deepspeed", str(REPO / "zero_stage2_config.json"))
        find_spec.assert_called_with("mpi4py")

    @parameterized.named_parameters(("launcher_env", {"LOCAL_RANK": "0"}, -1, None),
                                    ("launcher_argument", {}, 0, None), ("mpi4py", {}, -1, "mpi4py spec"))
    def test_deepspeed_under_a_launcher_or_with_mpi4py_is_accepted(self, env, local_rank, mpi4py):
        from t5kit.config import launch_checks
        args = SimpleNamespace(deepspeed="zero_stage2_config.json", local_rank=local_rank)
        with mock.patch.dict(os.environ, env), \
                mock.patch("importlib.util.find_spec", return_value=mpi4py) as find_spec:
            if "LOCAL_RANK" not in env:
                os.environ.pop("LOCAL_RANK", None)
            launch_checks.check_deepspeed_launcher(args)  # raises UsageError on refusal
        # A launched process never looks for mpi4py; plain python accepts only once it has found it.
        self.assertEqual(find_spec.call_args_list, [mock.call("mpi4py")] if mpi4py else [])


class AccelerateAndPrecisionTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("mixed_precision", {"ACCELERATE_MIXED_PRECISION": "fp16"}, "mixed_precision: fp16 but our flags ask for no"),
        ("accumulation", {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "8"},
         "gradient_accumulation_steps=8 but --gradient_accumulation_steps is 1"),
        ("clipping", {"ACCELERATE_GRADIENT_CLIPPING": "0.1"}, "gradient_clipping=0.1 but --max_grad_norm is 1.0"),
        ("deepspeed_file", {"ACCELERATE_DEEPSPEED_CONFIG_FILE": "missing_ds.json"},
         "^the accelerate deepspeed_config_file missing_ds.json not found; pass a DeepSpeed JSON"),
    )
    def test_accelerate_config_that_disagrees_is_refused(self, env, message):
        with mock.patch.dict(os.environ, env), self.assertRaisesRegex(UsageError, message):
            training_args()

    def test_accelerate_defaults_pass(self):
        with mock.patch.dict(os.environ, {"ACCELERATE_MIXED_PRECISION": "no"}):
            self.assertFalse(training_args().bf16)

    def test_fp16_and_bf16_together(self):
        with self.assertRaisesRegex(UsageError, "--bf16 and --fp16 are both set; pick one"):
            training_args("--bf16", "true", "--fp16", "true")

    def test_bf16_without_gpu_or_cpu_autocast(self):
        with self.assertRaisesRegex(UsageError, "--bf16 true needs a GPU with bf16, or --use_cpu true"):
            parsing.parse_flags((T5TrainingArguments,), ["--output_dir", "/tmp/x", "--bf16", "true"])

    def test_bf16_defaults_off_without_a_bf16_gpu(self):
        import torch
        if torch.cuda.is_available():
            self.skipTest("this machine has a GPU; the default follows its bf16 support")
        self.assertFalse(training_args().bf16)
        self.assertTrue(training_args("--bf16", "true").bf16)

    @parameterized.parameters((False, 1), (True, 0))
    def test_bf16_on_a_cpu_without_bf16_instructions_warns(self, native, warnings):
        import torch
        if torch.cuda.is_available():
            self.skipTest("this machine has a GPU: --bf16 runs there")
        with mock.patch.object(torch.cpu, "_is_avx512_bf16_supported", return_value=native), \
                mock.patch.object(torch.cpu, "_is_amx_tile_supported", return_value=False), \
                self.assertLogs("t5kit.config.checks", "WARNING") as logs:
            checks.logger.warning("sentinel")  # assertLogs needs one record either way
            self.assertTrue(checks.check_precision(True, False, True))
        emulated = [line for line in logs.output if "without bf16 instructions" in line]
        self.assertLen(emulated, warnings)


if __name__ == "__main__":
    absltest.main()
