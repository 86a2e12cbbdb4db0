"""Two CPU processes (gloo) reach the loss curve of one process at the same global batch and seed. The launchers
themselves: DDP under torchrun and accelerate, DeepSpeed ZeRO-2 under its own launcher. The rest (ZeRO-2/ZeRO-3,
accelerate's DeepSpeed config, packing, streaming resume, fine-tuning) start their two processes with
tests/forked.py's run_ranks: torchrun's environment and store, without an interpreter start per process."""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from absl.testing import absltest, parameterized
from safetensors.torch import load_file

from tests.forked import CAUSE_MARKERS, accelerate_launch_args, run_ranks
from tests.helpers import REPO, VENV_BIN, fine_tune, free_port, pre_train, require, tiny_flags, tiny_run_flags

pytestmark = pytest.mark.launch  # every test runs two processes

STEPS = 4
# What DeepSpeed prints when its communication backend starts on CPU processes (deepspeed 0.19): the sign that a run
# trained under DeepSpeed, whose losses alone would match plain DDP's as well.
DEEPSPEED_STARTED = "DeepSpeed deepspeed.ops.comm.deepspeed_shm_comm_op built successfully"


def launch(launcher, argv, timeout=480):
    """Runs pre_train_t5.py under a launcher with 2 CPU processes; returns the completed process."""
    port = free_port()  # a fresh one per launch: the last launch's port may still be held by the kernel
    env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_PORT=port)
    commands = {
        "torchrun": [str(VENV_BIN / "torchrun"), "--nproc_per_node", "2", "--master_port", port],
        # `accelerate launch --cpu --num_processes 2` silently starts one process; --multi_gpu starts two,
        # and --use_cpu true in our flags keeps them on the CPU (gloo).
        # DeepSpeed's own launcher runs on CPU too (it passes --local_rank=N, which our flags accept).
        "deepspeed": [str(VENV_BIN / "deepspeed"), "--num_gpus", "2", "--master_port", port],
        "accelerate": [str(VENV_BIN / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2",
                       "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                       "--main_process_port", port],
    }
    result = subprocess.run([*commands[launcher], str(REPO / "pre_train_t5.py"), *argv], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        # The launcher's summary fills the tail; the lines that say what went wrong may be far above it.
        causes = [line for line in result.stderr.splitlines() if CAUSE_MARKERS.search(line)]
        raise AssertionError(f"{launcher} failed ({result.returncode}); lines naming the cause:\n"
                             + "\n".join(causes[-20:]) + f"\n... stderr tail:\n{result.stderr[-3000:]}")
    return result


def accelerate_deepspeed_environment():
    """What `accelerate launch --use_deepspeed --deepspeed_config_file zero_stage2_config.json --num_processes 2`
    exports to its processes, by accelerate's own code."""
    from accelerate.utils.launch import prepare_deepspeed_cmd_env

    args = accelerate_launch_args(
        ["--use_deepspeed", "--deepspeed_config_file", str(REPO / "zero_stage2_config.json"), "--num_processes", "2",
         "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "x.py"])
    _, env = prepare_deepspeed_cmd_env(args)
    return {key: value for key, value in env.items() if key.startswith("ACCELERATE_")}


def losses(output_dir):
    history = json.loads((Path(output_dir) / "metrics.json").read_text())["log_history"]
    return [entry["loss"] for entry in history if "loss" in entry]


class TwoProcessEquivalenceTest(parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.corpus = str(require("gutenberg/austen-persuasion.txt"))
        cls.work = Path(absltest.get_default_test_tmpdir()) / "distributed"
        single = cls.work / "single"
        if not (single / "metrics.json").exists():
            pre_train(tiny_run_flags(str(single), cls.corpus, max_steps=STEPS, overwrite_output_dir=True))
        cls.single_losses = losses(single)

    def two_process_flags(self, name, **overrides):
        out = self.work / name
        return out, tiny_run_flags(str(out), self.corpus, max_steps=STEPS, per_device_train_batch_size=2,
                                   ddp_find_unused_parameters=False, overwrite_output_dir=True, **overrides)

    @parameterized.named_parameters(("torchrun", "torchrun"), ("accelerate", "accelerate"))
    def test_ddp_matches_one_process(self, launcher):
        out, argv = self.two_process_flags(f"ddp_{launcher}")
        result = launch(launcher, argv)
        self.assertIn("process rank 1 of 2", result.stdout + result.stderr)
        self.assertIn("global batch 4 = 2 per device x 1 accumulation x 2 processes", result.stdout)
        np.testing.assert_allclose(losses(out), self.single_losses, rtol=1e-4)

    @parameterized.named_parameters(("zero2", "zero_stage2_config.json"), ("zero3", "zero_stage3_config.json"))
    def test_deepspeed_matches_one_process(self, config):
        out, argv = self.two_process_flags(Path(config).stem, deepspeed=str(REPO / config))
        self.assertIn(DEEPSPEED_STARTED, run_ranks("pre_train_t5", argv).stdout)
        np.testing.assert_allclose(losses(out), self.single_losses, rtol=1e-3)

    def test_deepspeed_launcher_matches_one_process(self):
        out, argv = self.two_process_flags("deepspeed_launcher", deepspeed=str(REPO / "zero_stage2_config.json"))
        result = launch("deepspeed", argv)
        self.assertIn(DEEPSPEED_STARTED, result.stdout + result.stderr)
        np.testing.assert_allclose(losses(out), self.single_losses, rtol=1e-3)

    def test_accelerate_with_deepspeed_config_matches_one_process(self):
        """The JSON comes from accelerate's environment, not from --deepspeed."""
        out, argv = self.two_process_flags("accelerate_zero2")
        result = run_ranks("pre_train_t5", argv, env=accelerate_deepspeed_environment())
        self.assertIn("process rank 1 of 2", result.stdout)
        self.assertIn(DEEPSPEED_STARTED, result.stdout)
        np.testing.assert_allclose(losses(out), self.single_losses, rtol=1e-3)


class PackedTwoProcessTest(absltest.TestCase):

    def test_packed_ul2_on_two_processes_matches_one_process_accumulating_two_batches(self):
        """Packed batches are per device (docs/data.md#packing): each process takes alternate batches of the keyed
        sampler, so 2 processes x 1 batch see the rows of 1 process x 2 accumulated batches, and the loss curves
        agree (mean over real target tokens; model.accepts_loss_kwargs stays off)."""
        corpus = str(require("gutenberg/austen-persuasion.txt"))
        work = Path(absltest.get_default_test_tmpdir()) / "packed_distributed"

        def flags(out, **extra):
            return tiny_run_flags(str(work / out), corpus, objective="ul2", packing=True, max_steps=STEPS,
                                  overwrite_output_dir=True, **extra)

        pre_train(flags("single", gradient_accumulation_steps=2))
        result = run_ranks("pre_train_t5", flags("two", ddp_find_unused_parameters=False))
        self.assertIn("global batch 8 = 4 per device x 1 accumulation x 2 processes", result.stdout)
        np.testing.assert_allclose(losses(work / "two"), losses(work / "single"), rtol=1e-4)
        for out in ("single", "two"):
            data = json.loads((work / out / "metrics.json").read_text())["data"]
            self.assertGreater(data["examples_per_step"], 8)


class StreamingTwoProcessResumeTest(absltest.TestCase):

    def test_streaming_ddp_resumes_at_the_window_all_ranks_reached(self):
        """Rank 0 reads each stream batch for both ranks (accelerate dispatches it) and trains on its first half;
        the checkpoint must record the highest window of either rank. A constant learning rate lets a run stopped
        at step 2 and resumed to step 4 be compared bit for bit with a run of 4 steps."""
        work = Path(self.create_tempdir().full_path)
        corpus = str(require("gutenberg/austen-persuasion.txt"))

        def stream_flags(out, steps, **extra):
            return tiny_run_flags(str(work / out), corpus, streaming=True, max_steps=steps, save_strategy="steps",
                                  save_steps=2, per_device_train_batch_size=2, lr_scheduler_type="constant",
                                  ddp_find_unused_parameters=False, **extra)

        run_ranks("pre_train_t5", stream_flags("plain", 4))
        run_ranks("pre_train_t5", stream_flags("resumed", 2))
        position = json.loads((work / "resumed/checkpoint-2/stream_position.json").read_text())
        self.assertEqual(position["window"], 8)  # 2 steps x 2 windows x 2 ranks
        result = run_ranks("pre_train_t5", stream_flags("resumed", 4, resume_from_checkpoint="auto"))
        self.assertIn("stream resumes at window 8 (epoch 0)", result.stdout + result.stderr)
        expected = load_file(work / "plain/model.safetensors")
        got = load_file(work / "resumed/model.safetensors")
        for name, tensor in expected.items():
            self.assertTrue(got[name].equal(tensor), f"{name} differs after resuming")


class FineTuneTwoProcessTest(absltest.TestCase):

    def test_ddp_fine_tuning_matches_one_process(self):
        """SST-2's label words are both 2 tokens with EOS, so the mean of per-process mean losses equals the mean
        over the global batch exactly (with targets of different lengths DDP weighs each process equally, as
        plain PyTorch DDP does). Random batches: length buckets are cut per device, so they differ by design."""
        work = Path(self.create_tempdir().full_path)

        def run_flags(out, batch):
            return tiny_flags(str(work / out), dataset_name="sst2", data_dir=[str(require("glue/SST-2"))],
                              per_device_train_batch_size=batch, train_sampling_strategy="random",
                              eval_strategy="no", save_strategy="no", load_best_model_at_end=False,
                              do_eval=False, ddp_find_unused_parameters=False)

        fine_tune(run_flags("single", 4))
        run_ranks("fine_tune_t5", run_flags("ddp", 2))
        np.testing.assert_allclose(losses(work / "ddp"), losses(work / "single"), rtol=1e-4)


if __name__ == "__main__":
    absltest.main()
