"""train/cpu_fp16.py: under --fp16 --use_cpu the trainers' accelerator gets fp16 autocast and torch's CPU GradScaler
(accelerate gives them to accelerators only, and would otherwise train in fp32 while config.yaml says fp16); fp32 and
bf16 runs keep the accelerator as accelerate builds it. Whole fp16 runs: tests/model/test_precision.py."""
import torch
from absl.testing import absltest, parameterized

from t5kit.model import precision
from t5kit.train.pretrain_trainer import PretrainTrainer
from t5kit.train.task_trainer import TaskTrainer
from tests.helpers import OneThreadTestCase, tiny_model, training_args


class CpuFp16Test(OneThreadTestCase):

    def trainer(self, cls, *argv):
        model = precision.prepare_model(tiny_model(), fp16="--fp16" in argv)
        return cls(model=model, args=training_args("--output_dir", str(self.dir / "out"), "--report_to", "none",
                                                   *argv))

    @parameterized.named_parameters(("pretrain", PretrainTrainer), ("task", TaskTrainer))
    def test_fp16_on_a_cpu_gets_autocast_and_a_grad_scaler(self, cls):
        accelerator = self.trainer(cls, "--fp16", "true").accelerator
        self.assertTrue(accelerator.native_amp)
        self.assertIsInstance(accelerator.scaler, torch.amp.GradScaler)
        self.assertEqual(accelerator.scaler._device, "cpu")
        with accelerator.autocast():
            self.assertEqual(torch.nn.Linear(4, 4)(torch.ones(1, 4)).dtype, torch.float16)

    @parameterized.named_parameters(("fp32", ()), ("bf16", ("--bf16", "true")))
    def test_other_precisions_keep_accelerates_own(self, argv):
        accelerator = self.trainer(TaskTrainer, *argv).accelerator
        self.assertIsNone(accelerator.scaler)
        self.assertEqual(accelerator.native_amp, bool(argv))  # accelerate's bf16 autocast on CPUs


if __name__ == "__main__":
    absltest.main()
