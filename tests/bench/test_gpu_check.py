"""bench/gpu_check.py's CPU dry run (--device cpu --tiny): the one prepared GPU check cannot rot between GPU windows.
Every section is in the JSON and the Markdown table, none failed, every section that runs on a CPU ran to the end and
carries its figures: the dry run has no time budget, so its outcome never depends on the machine's speed. The budget
itself (a section that would overrun is skipped, one that runs past it is stopped) is tested on its own below."""
import contextlib
import io
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path
from unittest import mock

import pytest
from absl.testing import absltest, parameterized

from bench import gpu_check, gpu_sections, pretrain_throughput
from t5kit.config.checks import cpu_has_native_bf16
from tests.forked import accelerate_launch_args, run_forked, run_ranks
from tests.helpers import REPO, require

SECTIONS = ("environment", "throughput_compiled_sdpa", "bf16_correctness", "fp16_correctness",
            "throughput_compiled_sdpa_fp16", "ul2_packing", "throughput_eager_sdpa",
            "throughput_compiled_t5_flex_workers2", "throughput_compiled_t5_flex_workers2_batch128",
            "throughput_compiled_t5_flex_workers2_batch128_bf16_activations",
            "throughput_compiled_t5_flex_workers2_batch128_bf16_activations_loss_chunks",
            "throughput_compiled_t5_flex_workers2_batch128_bf16_activations_fused_rmsnorm", "packed_equivalence",
            "trainer_profile", "attention_bias", "inference", "zero2", "fsdp",
            "throughput_eager_t5_flex",
            "quality")


# The dry run in two halves of about equal CPU time, each a test class of its own, so that pytest-xdist's two workers
# run them at once. The first half holds the sections a CPU only notes as left to the GPU.
FIRST_HALF = ("environment", "throughput_compiled_sdpa", "bf16_correctness", "throughput_compiled_sdpa_fp16",
              "throughput_eager_sdpa",
              "throughput_compiled_t5_flex_workers2", "throughput_compiled_t5_flex_workers2_batch128",
              "throughput_compiled_t5_flex_workers2_batch128_bf16_activations",
              "throughput_compiled_t5_flex_workers2_batch128_bf16_activations_loss_chunks",
              "throughput_compiled_t5_flex_workers2_batch128_bf16_activations_fused_rmsnorm", "packed_equivalence",
              "trainer_profile", "attention_bias", "inference", "throughput_eager_t5_flex", "quality")
SECOND_HALF = ("fp16_correctness", "ul2_packing", "zero2", "fsdp")


RUN_COMMAND = gpu_check.run_command


def forked_scripts(argv, log, env, timeout):
    """gpu_check.run_command for the dry run: the Python scripts among its commands (pre_train_t5.py, bench/*.py)
    run in forked processes (tests/forked.py: ~6 s of imports less each), torchrun's and accelerate's processes too,
    with the environment each launcher gives them (torchrun's; accelerate's own prepare_simple_launcher_cmd_env for
    its --cpu launch)."""
    if argv[0] != sys.executable:
        return RUN_COMMAND(argv, log, env, timeout)
    timeout = timeout or 900
    if argv[1:3] == ["-m", "torch.distributed.run"] and argv[3] == "--nproc_per_node":
        try:
            done = run_ranks(argv[5][:-3], argv[6:], nproc=int(argv[4]), env=env, timeout=timeout)
        except AssertionError as failure:
            log.write(str(failure))
            return 1
    elif argv[1:3] == ["-m", "accelerate.commands.launch"]:
        from accelerate.utils.launch import prepare_simple_launcher_cmd_env

        args = accelerate_launch_args(argv[3:])
        if not args.cpu:  # accelerate's other launchers start processes of their own
            return RUN_COMMAND(argv, log, env, timeout)
        command, launch_env = prepare_simple_launcher_cmd_env(args)
        done = run_forked(command[1][:-3], command[2:], env={**env, **launch_env}, timeout=timeout)
    elif argv[1].endswith(".py"):
        done = run_forked(argv[1][:-3], argv[2:], env=env, timeout=timeout)
    else:
        return RUN_COMMAND(argv, log, env, timeout)
    log.write(done.stdout)
    return done.returncode


class DryRunTestCase(parameterized.TestCase):
    """Runs `bench/gpu_check.py --device cpu --tiny --only <sections>` once for the class (its main() here)."""

    sections = ()

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        require("t5_spiece")
        cls.out = f"{absltest.get_default_test_tmpdir()}/gpu_check_{cls.__name__}"
        with mock.patch.object(gpu_check, "run_command", forked_scripts), contextlib.redirect_stdout(io.StringIO()):
            gpu_check.main(["--device", "cpu", "--tiny", "--output_dir", cls.out, "--only", *cls.sections])
        with open(f"{cls.out}/gpu_check.json") as handle:
            cls.report = json.load(handle)

    def check_every_section_is_reported_and_none_failed(self):
        self.assertEqual(list(self.report["sections"]), list(SECTIONS))
        self.assertIsNone(self.report["budget_s"])
        for name, result in self.report["sections"].items():
            if name not in self.sections:
                self.assertEqual((result["status"], result["note"]), ("skipped", "--only"), name)
                continue
            self.assertIn(result["status"], ("ok", "skipped"), f"{name}: {result}")
            if result["status"] != "ok":
                self.assertNotEmpty(result["note"], name)
                self.assertNotIn("overrun", result["note"], name)
        table = open(f"{self.out}/gpu_check.md").read()
        for name in SECTIONS:
            self.assertIn(f"| {name} |", table)


@pytest.mark.launch  # the dry run starts a process per section
class DryRunFirstHalfTest(DryRunTestCase):
    sections = FIRST_HALF

    def test_every_section_is_reported_and_none_failed(self):
        self.check_every_section_is_reported_and_none_failed()

    def test_the_core_sections_ran_with_their_figures(self):
        sections = self.report["sections"]
        self.assertEqual(sections["environment"]["figures"]["device"], "cpu")
        arm = sections["throughput_eager_sdpa"]["figures"]["arms"][0]
        self.assertGreater(arm["trainer_tokens_per_s"], 0)
        self.assertAlmostEqual(arm["trainer_loss"], arm["bare_loss"], delta=0.05)  # same model, batches, optimizer
        bf16 = sections["bf16_correctness"]
        self.assertEqual(bf16["status"], "ok", bf16)
        self.assertTrue(all(a["all_finite"] for a in bf16["figures"]["arms"].values()), bf16)
        self.assertTrue(bf16["figures"]["arms"]["fp32"]["within_tolerance"])  # fp32 against itself: gap 0
        self.assertFalse(bf16["figures"]["arms"]["fp32"]["bf16"])  # read back from the run's config.yaml
        if cpu_has_native_bf16():  # elsewhere the section runs fp32 alone
            self.assertEqual(set(bf16["figures"]["arms"]), {"fp32", "bf16", "bf16_z_loss", "bf16_activations"})
            self.assertTrue(bf16["figures"]["arms"]["bf16_activations"]["bf16"])
        self.assertEqual(sections["inference"]["status"], "ok", sections["inference"])
        lines = [line for line in sections["inference"]["figures"]["lines"] if " ex/s" in line]
        self.assertLen(lines, 3, lines)  # SST-2, the dev sets' sum, translation
        for line in lines:  # predict_t5.py --compile's arm, with the eager predictor's predictions
            self.assertRegex(line, r"predictor compiled [\d.]+ ex/s")
        self.assertIn("same fp32 predictions: True", lines[0])

    def test_the_compiled_arms_and_quality_say_why_they_are_left_to_the_gpu(self):
        for name in ("throughput_compiled_sdpa", "throughput_compiled_sdpa_fp16",
                     "throughput_compiled_t5_flex_workers2", "throughput_compiled_t5_flex_workers2_batch128",
                     "throughput_compiled_t5_flex_workers2_batch128_bf16_activations",
                     "throughput_compiled_t5_flex_workers2_batch128_bf16_activations_loss_chunks",
                     "throughput_compiled_t5_flex_workers2_batch128_bf16_activations_fused_rmsnorm",
                     "throughput_eager_t5_flex",
                     "packed_equivalence", "quality"):
            self.assertIn("--tiny", self.report["sections"][name]["note"])


@pytest.mark.launch  # torchrun with DeepSpeed, accelerate with FSDP
class DryRunSecondHalfTest(DryRunTestCase):
    sections = SECOND_HALF

    def test_every_section_is_reported_and_none_failed(self):
        self.check_every_section_is_reported_and_none_failed()

    def test_packing_reports_padding_and_real_tokens_of_both_arms(self):
        section = self.report["sections"]["ul2_packing"]
        self.assertEqual(section["status"], "ok", section)
        padded, packed = section["figures"]["packing_false"], section["figures"]["packing_true"]
        self.assertLess(packed["encoder_padding"], padded["encoder_padding"])
        self.assertGreater(packed["examples_per_step"], padded["examples_per_step"])
        self.assertGreater(section["figures"]["packed_over_padded"], 0)

    def test_fp16_trains_with_finite_losses_near_fp32(self):
        figures = self.report["sections"]["fp16_correctness"]["figures"]
        self.assertTrue(figures["all_finite"], figures)
        self.assertTrue(figures["within_tolerance"], figures)

    def test_zero2_and_fsdp_train_with_finite_losses(self):
        for name in ("zero2", "fsdp"):
            losses = self.report["sections"][name]["figures"]["losses"]
            self.assertLen(losses, 5, name)
            self.assertTrue(all(loss == loss and abs(loss) != float("inf") for loss in losses), name)


class SectionListTest(parameterized.TestCase):

    def test_the_halves_hold_every_section_once(self):
        self.assertCountEqual([*FIRST_HALF, *SECOND_HALF], SECTIONS)
        self.assertEqual([row[0] for row in gpu_check.SECTIONS], list(SECTIONS))

    def test_each_call_of_the_window_plan_fits_its_seconds(self):
        """docs/benchmarks.md's 15-minute window: quality first in call 1, every section that must fit within the
        call's budget, which leaves the call's limit room for the wheels' install and the start."""
        self.assertEqual(gpu_check.PLANS["call1"][0][0], "quality")
        for plan, (sections, seconds, must_fit) in gpu_check.PLANS.items():
            self.assertContainsSubset(sections, SECTIONS)
            self.assertLessEqual(gpu_check.plan_seconds(plan), seconds, plan)
            self.assertLessEqual(seconds, gpu_check.CALL_LIMITS_S[plan] - 15, plan)
            args = gpu_check.parse_args(["--output_dir", "/tmp/unused", "--plan", plan])
            self.assertEqual((args.only, args.budget_s), (list(sections), seconds))

    @parameterized.named_parameters(
        ("loss_chunks", "_loss_chunks", ("loss_chunk_tokens", gpu_check.LOSS_CHUNK_TOKENS), ("fused_rmsnorm", False)),
        ("fused_rmsnorm", "_fused_rmsnorm", ("loss_chunk_tokens", 0), ("fused_rmsnorm", True)))
    def test_the_kernel_arms_hand_the_bench_their_flags(self, suffix, *expected):
        """The chunked-loss and fused-norm arms are the bf16-stream arm plus one flag each, which the bench parses
        (the dry run only notes these compiled arms as left to the GPU)."""
        out, commands = Path(self.create_tempdir().full_path), []
        (out / "logs").mkdir()

        def command(log_name, argv):
            commands.append((log_name, [str(value) for value in argv]))
            Path(commands[-1][1][commands[-1][1].index("--json_out") + 1]).write_text("{}")

        name = f"throughput_compiled_t5_flex_workers2_batch128_bf16_activations{suffix}"
        section = {row[0]: row[3] for row in gpu_check.SECTIONS}[name]
        section(types.SimpleNamespace(args=types.SimpleNamespace(tiny=False, device="cpu", batch_size=64), out=out,
                                      command=command))
        (log_name, argv), = commands
        self.assertEqual(log_name, name)
        args = pretrain_throughput.parse_args(argv[2:])
        self.assertEqual((args.batch_size, args.activation_dtype, args.compile), (128, "bfloat16", True))
        for flag, value in expected:
            self.assertEqual(getattr(args, flag), value, flag)

    def test_the_report_is_written_as_each_section_finishes(self):
        out = self.create_tempdir().full_path
        check = gpu_check.Check(gpu_check.parse_args(["--device", "cpu", "--tiny", "--output_dir", out,
                                                      "--only", "environment"]))
        check.run("environment", 5, gpu_sections.environment)
        with open(f"{out}/gpu_check.json") as handle:  # written before the check ends
            self.assertEqual(json.load(handle)["sections"]["environment"]["figures"]["device"], "cpu")

    def test_a_misspelt_section_is_refused_before_anything_runs(self):
        out = absltest.get_default_test_tmpdir() + "/gpu_check_misspelt"
        done = subprocess.run([sys.executable, "bench/gpu_check.py", "--device", "cpu", "--tiny", "--output_dir", out,
                               "--only", "ul2_packin"], cwd=REPO, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 2)
        self.assertIn("unknown section(s) ul2_packin; the sections: environment,", done.stderr)
        self.assertFalse(os.path.exists(out))


class BudgetTest(parameterized.TestCase):
    """A GPU window's budget: a section whose estimate does not fit is skipped before it starts, and a command that
    outlives what is left is stopped promptly, each with its note (real processes, no clock mocked)."""

    def check(self, budget_s, only=None):
        out = self.create_tempdir().full_path
        argv = ["--device", "cpu", "--tiny", "--output_dir", out, "--budget_s", str(budget_s)]
        return gpu_check.Check(gpu_check.parse_args([*argv, *(["--only", *only] if only else [])]))

    def test_a_section_that_would_overrun_is_skipped_before_it_starts(self):
        check, ran = self.check(60), []
        check.run("bf16_correctness", 3600, ran.append)
        self.assertEmpty(ran)
        self.assertEqual(check.results["bf16_correctness"]["status"], "skipped")
        self.assertRegex(check.results["bf16_correctness"]["note"], r"would overrun: estimate 3600 s, \d+ s left")

    @pytest.mark.slow  # a command stopped after its budget
    def test_a_command_that_outlives_the_budget_is_stopped(self):
        check = self.check(2)
        began = time.time()
        check.run("zero2", 1, lambda c: c.command("zero2", [sys.executable, "-c", "import time; time.sleep(120)"]))
        self.assertLess(time.time() - began, 60)  # stopped at the budget's end, not after the command's 120 s
        result = check.results["zero2"]
        self.assertEqual(result["status"], "stopped", result)
        self.assertIn("stopped at the end of the budget", result["note"])
        self.assertEqual(result["figures"], {})

    def test_the_dry_run_has_no_budget_unless_given_one(self):
        out = self.create_tempdir().full_path
        dry_run = gpu_check.Check(gpu_check.parse_args(["--device", "cpu", "--tiny", "--output_dir", out]))
        self.assertEqual(dry_run.left(), float("inf"))
        gpu_window = gpu_check.Check(gpu_check.parse_args(["--device", "cuda", "--output_dir", out]))
        self.assertEqual(gpu_window.budget, 480.0)


class CTranslate2ProbeTest(absltest.TestCase):
    """The inference section runs the CTranslate2 arms only where the package loads and can use the device (its
    wheels link CUDA 12, which a CUDA 13 image lacks)."""

    def test_the_installed_package_runs_on_the_cpu(self):
        self.assertTrue(gpu_sections.ctranslate2_runs("cpu"))  # requirements.txt installs it

    def test_a_package_that_fails_to_load_or_sees_no_gpu_is_left_out(self):
        with mock.patch.dict(sys.modules, {"ctranslate2": None}):  # the import raises ImportError
            self.assertFalse(gpu_sections.ctranslate2_runs("cpu"))
        no_gpu = types.SimpleNamespace(get_cuda_device_count=lambda: 0)
        with mock.patch.dict(sys.modules, {"ctranslate2": no_gpu}):
            self.assertFalse(gpu_sections.ctranslate2_runs("cuda"))
            self.assertTrue(gpu_sections.ctranslate2_runs("cpu"))


if __name__ == "__main__":
    absltest.main()
