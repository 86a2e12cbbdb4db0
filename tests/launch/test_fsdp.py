"""FSDP through accelerate (configs/accelerate/fsdp.yaml: FSDP2, one T5 block per unit, sharded checkpoints, a
full final model) and the checks that keep its config from contradicting our flags.

Why the training test lifts one gate. accelerate 1.15 turns only GPU-like process groups into FSDP
(accelerate/state.py: DistributedType.FSDP is set for MULTI_GPU, MULTI_XPU, ... but never MULTI_CPU), so on these
CPU-only machines `accelerate launch --config_file configs/accelerate/fsdp.yaml ... --use_cpu true` would train plain
DDP; test_accelerate_keeps_cpu_processes_out_of_fsdp shows it, and launch_checks refuses such a run. torch's FSDP2
(fully_shard) itself runs on CPU over gloo, so the equivalence test starts two processes with the environment
accelerate exports for our config and lifts that one gate in the child (the distributed type becomes FSDP with
accelerate's own plugin, read from that environment); everything else is accelerate's and the Trainer's FSDP2 path as
a GPU run takes it: accelerate's fsdp2_prepare_model, sharded checkpoints, resume, our full final save.
"""
import json
import os
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest
import yaml
from absl.testing import absltest, parameterized
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM

from t5kit.config import launch_checks
from t5kit.errors import UsageError
from tests.forked import accelerate_launch_args, run_ranks
from tests.helpers import REPO, TinyRunTestCase, free_port, pre_train, tiny_run_flags

FSDP_CONFIG = REPO / "configs/accelerate/fsdp.yaml"
STEPS = 4

# The child: pre_train_t5.py as on the command line, with accelerate's CPU gate lifted (see the module doc) and our
# refusal of FSDP on CPU, which exists because of that gate, switched off.
CHILD = """
import importlib, sys
import accelerate.state
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin
from t5kit import cli
from t5kit.config import launch_checks

original = accelerate.state.AcceleratorState.__init__

def fsdp_on_cpu(self, *args, **kwargs):
    original(self, *args, **kwargs)
    if self.distributed_type == DistributedType.MULTI_CPU and getattr(self, "fsdp_plugin", None) is None:
        self.distributed_type = DistributedType.FSDP
        self.fsdp_plugin = FullyShardedDataParallelPlugin()  # reads the FSDP_* variables, as accelerate does

accelerate.state.AcceleratorState.__init__ = fsdp_on_cpu
launch_checks.check_fsdp_device = lambda args: None
entry = importlib.import_module("pre_train_t5")
sys.argv = ["pre_train_t5.py", *sys.argv[1:]]
cli.run_cli(entry.main)
"""

STATE_CHILD = """
from accelerate import Accelerator
print(f"distributed_type {Accelerator(cpu=True).distributed_type.value}")
"""


def accelerate_environment(num_processes=2):
    """What `accelerate launch --config_file configs/accelerate/fsdp.yaml` exports, by accelerate's own code."""
    from accelerate.utils.launch import prepare_multi_gpu_env

    args = accelerate_launch_args(["--config_file", str(FSDP_CONFIG), "--num_processes", str(num_processes),
                                   "--main_process_port", free_port(), "x.py"])
    return {key: value for key, value in prepare_multi_gpu_env(args).items()
            if key.startswith(("ACCELERATE_", "FSDP_"))}


def losses(output_dir):
    history = json.loads((Path(output_dir) / "metrics.json").read_text())["log_history"]
    return [entry["loss"] for entry in history if "loss" in entry]


class ShippedConfigTest(absltest.TestCase):

    def test_fsdp2_full_shard_t5_blocks_sharded_checkpoints_precision_from_our_flags(self):
        config = yaml.safe_load(FSDP_CONFIG.read_text())
        self.assertEqual(config["distributed_type"], "FSDP")
        self.assertEqual(config["mixed_precision"], "no")  # --bf16/--fp16 decide
        fsdp = config["fsdp_config"]
        self.assertEqual((fsdp["fsdp_version"], fsdp["fsdp_auto_wrap_policy"], fsdp["fsdp_state_dict_type"],
                          fsdp["fsdp_reshard_after_forward"]),
                         (2, "TRANSFORMER_BASED_WRAP", "SHARDED_STATE_DICT", True))
        # No class named: accelerate wraps the model's _no_split_modules (T5Block, MT5Block, UMT5Block, LongT5Block).
        self.assertNotIn("fsdp_transformer_layer_cls_to_wrap", fsdp)

    def test_what_accelerate_exports_for_it_passes_our_checks_on_a_gpu_machine(self):
        env = accelerate_environment()
        self.assertEqual((env["ACCELERATE_USE_FSDP"], env["FSDP_VERSION"], env["ACCELERATE_MIXED_PRECISION"]),
                         ("true", "2", "no"))
        with mock.patch.dict(os.environ, env), mock.patch("torch.cuda.is_available", return_value=True):
            launch_checks.check_fsdp_config(fsdp_args())


def fsdp_args(**overrides):
    """The fields check_fsdp_config reads, as T5TrainingArguments holds them for a GPU run."""
    return SimpleNamespace(**{"fsdp": [], "deepspeed": None, "use_cpu": False, "gradient_checkpointing": False,
                              "activation_checkpointing": False, **overrides})


class FsdpConfigChecksTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("set_twice", {}, dict(fsdp=["full_shard"]), "FSDP is set twice"),
        ("with_deepspeed", {}, dict(deepspeed="zero_stage2_config.json"), "FSDP and DeepSpeed both set"),
        ("on_cpu", {}, dict(use_cpu=True), "the FSDP config needs GPUs: on CPU processes"),
        ("local_state_dict", {"FSDP_STATE_DICT_TYPE": "LOCAL_STATE_DICT"}, {},
         "fsdp_state_dict_type: LOCAL_STATE_DICT, which resume cannot read"),
        ("activation_checkpointing_twice", {"FSDP_ACTIVATION_CHECKPOINTING": "true"},
         dict(gradient_checkpointing=True), "checkpoint activations once"),
    )
    def test_refused(self, env, overrides, message):
        with mock.patch.dict(os.environ, {"ACCELERATE_USE_FSDP": "true", **env}), \
                mock.patch("torch.cuda.is_available", return_value=True):
            with self.assertRaisesRegex(UsageError, message):
                launch_checks.check_fsdp_config(fsdp_args(**overrides))

    def test_no_gpu_is_refused_like_use_cpu(self):
        with mock.patch.dict(os.environ, {"ACCELERATE_USE_FSDP": "true"}), \
                mock.patch("torch.cuda.is_available", return_value=False):
            with self.assertRaisesRegex(UsageError, "the FSDP config needs GPUs"):
                launch_checks.check_fsdp_config(fsdp_args())

    def test_hf_fsdp_flag_alone_is_checked_too(self):
        with mock.patch.dict(os.environ, {"ACCELERATE_USE_FSDP": "false"}), \
                mock.patch("torch.cuda.is_available", return_value=False):
            with self.assertRaisesRegex(UsageError, "the FSDP config needs GPUs"):
                launch_checks.check_fsdp_config(fsdp_args(fsdp=["full_shard"]))
            launch_checks.check_fsdp_config(fsdp_args())  # no FSDP: nothing to check

    def test_mixed_precision_in_the_accelerate_config_must_match_our_flags(self):
        """accelerate exports an FSDP config's mixed_precision as it does any config's."""
        with mock.patch.dict(os.environ, {"ACCELERATE_USE_FSDP": "true", "ACCELERATE_MIXED_PRECISION": "bf16"}):
            with self.assertRaisesRegex(UsageError, "sets mixed_precision: bf16 but our flags ask for no"):
                launch_checks.check_accelerate_env(SimpleNamespace(bf16=False, fp16=False,
                                                                   gradient_accumulation_steps=1, max_grad_norm=1.0))


@pytest.mark.launch  # two processes (tests/forked.py run_ranks: torchrun's environment)
class FsdpOnCpuTest(TinyRunTestCase):

    def test_accelerate_keeps_cpu_processes_out_of_fsdp(self):
        """The reason launch_checks refuses FSDP on CPU: with the environment of our FSDP config, accelerate's state
        for CPU processes is MULTI_CPU (DDP), not FSDP."""
        result = run_ranks("-c", [STATE_CHILD], env=accelerate_environment())
        self.assertEqual(result.stdout.count("distributed_type MULTI_CPU"), 2, result.stdout)

    def test_fsdp2_two_processes_match_one_process_and_resume_bit_identical(self):
        work = self.dir
        single = work / "single"
        pre_train(tiny_run_flags(str(single), self.corpus, max_steps=STEPS))

        def two_process_flags(out, **extra):
            return tiny_run_flags(str(work / out), self.corpus, max_steps=STEPS, per_device_train_batch_size=2,
                                  save_strategy="steps", save_steps=2, **extra)

        env = accelerate_environment()
        child = CHILD.format(repo=str(REPO))
        result = run_ranks("-c", [child, *two_process_flags("fsdp")], env=env)
        self.assertIn("global batch 4 = 2 per device x 1 accumulation x 2 processes", result.stdout + result.stderr)
        np.testing.assert_allclose(losses(work / "fsdp"), losses(single), rtol=1e-4)
        # Checkpoints are sharded (one shard per process, torch.distributed.checkpoint), with our manifest.
        checkpoint = work / "fsdp/checkpoint-2"
        self.assertTrue((checkpoint / "pytorch_model_fsdp_0").is_dir())
        self.assertTrue((checkpoint / "optimizer_0").is_dir())
        self.assertTrue((checkpoint / "manifest.json").is_file())
        self.assertFalse((checkpoint / "model.safetensors").exists())
        # A run resumed from checkpoint-2 ends where the uninterrupted run ended, bit for bit.
        resumed = two_process_flags("resumed", resume_from_checkpoint=str(checkpoint))
        run_ranks("-c", [child, *resumed], env=env)
        expected, got = load_file(work / "fsdp/model.safetensors"), load_file(work / "resumed/model.safetensors")
        self.assertEqual(sorted(got), sorted(expected))
        for name, tensor in expected.items():
            self.assertTrue(got[name].equal(tensor), f"{name} differs after resuming")
        # The final model is one full model: from_pretrained reads it, with every weight of the right shape.
        model = AutoModelForSeq2SeqLM.from_pretrained(work / "fsdp")
        reference = AutoModelForSeq2SeqLM.from_pretrained(single)
        for (name, weight), (_, reference_weight) in zip(model.state_dict().items(), reference.state_dict().items()):
            self.assertEqual(weight.shape, reference_weight.shape, name)
            np.testing.assert_allclose(weight.numpy(), reference_weight.numpy(), rtol=1e-3, atol=1e-5,
                                       err_msg=name)


if __name__ == "__main__":
    absltest.main()
