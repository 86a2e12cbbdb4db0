"""optim/optimizer_classes.py: which optimizer class a run builds, and with which arguments. Trainer's choice for
--optim, with GroupedAdafactor for adafactor and AdamWScale for AdamW under --adamw_rms_scaling (given only the
arguments it takes); both trainers build theirs through it."""
import torch
from absl.testing import absltest, parameterized

from t5kit.optim import optimizer_classes
from t5kit.optim.adamw_scale import AdamWScale
from t5kit.optim.grouped_adafactor import GroupedAdafactor
from t5kit.train import task_trainer
from t5kit.train.pretrain_trainer import PretrainTrainer
from tests.helpers import training_args

T5_SETTINGS = {"scale_parameter": False, "relative_step": False, "warmup_init": False}  # Trainer's --optim adafactor


class TrainersChoiceTest(parameterized.TestCase):

    @parameterized.named_parameters(("pre_training", PretrainTrainer), ("fine_tuning", task_trainer.TaskTrainer))
    def test_trainers_build_it_under_the_flag(self, trainer_cls):
        for optim in ("adamw_torch", "adamw_torch_fused"):
            optimizer_cls, kwargs = trainer_cls.get_optimizer_cls_and_kwargs(training_args(
                "--optim", optim, "--adamw_rms_scaling", "true", "--learning_rate", "0.02"))
            self.assertIs(optimizer_cls, AdamWScale)
            self.assertEqual(kwargs, {"lr": 0.02, "betas": (0.9, 0.999), "eps": 1e-8})
        optimizer_cls, _ = trainer_cls.get_optimizer_cls_and_kwargs(training_args())
        self.assertIs(optimizer_cls, torch.optim.AdamW)


    @parameterized.named_parameters(("pre_training", PretrainTrainer),
                                    ("fine_tuning", task_trainer.TaskTrainer))
    def test_trainers_build_it_for_optim_adafactor(self, trainer_cls):
        optimizer_cls, kwargs = trainer_cls.get_optimizer_cls_and_kwargs(training_args("--optim", "adafactor"))
        self.assertIs(optimizer_cls, GroupedAdafactor)
        self.assertEqual({key: kwargs[key] for key in T5_SETTINGS if key in kwargs},
                         {"scale_parameter": False, "relative_step": False})

    @parameterized.named_parameters(("pre_training", PretrainTrainer), ("fine_tuning", task_trainer.TaskTrainer))
    def test_both_trainers_ask_this_module(self, trainer_cls):
        self.assertIs(trainer_cls.get_optimizer_cls_and_kwargs, optimizer_classes.optimizer_cls_and_kwargs)


class OptimizerClsAndKwargsTest(parameterized.TestCase):

    def test_adafactor_gets_t5s_settings_and_the_learning_rate(self):
        optimizer_cls, kwargs = optimizer_classes.optimizer_cls_and_kwargs(training_args(
            "--optim", "adafactor", "--learning_rate", "0.001"))
        self.assertIs(optimizer_cls, GroupedAdafactor)
        self.assertEqual({key: kwargs[key] for key in ("lr", "scale_parameter", "relative_step")},
                         {"lr": 0.001, "scale_parameter": False, "relative_step": False})

    def test_adamw_scale_takes_only_the_arguments_it_knows(self):
        optimizer_cls, kwargs = optimizer_classes.optimizer_cls_and_kwargs(training_args(
            "--optim", "adamw_torch_fused", "--adamw_rms_scaling", "true", "--adam_beta2", "0.98",
            "--adam_epsilon", "1e-6"))
        self.assertIs(optimizer_cls, AdamWScale)
        self.assertEqual(kwargs, {"lr": 5e-5, "betas": (0.9, 0.98), "eps": 1e-6})  # no fused=: AdamWScale has none

    @parameterized.named_parameters(("fused_adamw", "adamw_torch_fused", torch.optim.AdamW),
                                    ("sgd", "sgd", torch.optim.SGD))
    def test_everything_else_is_trainers_choice(self, optim, expected):
        optimizer_cls, kwargs = optimizer_classes.optimizer_cls_and_kwargs(training_args("--optim", optim))
        self.assertIs(optimizer_cls, expected)
        self.assertEqual(kwargs["lr"], 5e-5)
        if optim == "adamw_torch_fused":
            self.assertTrue(kwargs["fused"])  # Trainer's own kwargs, passed on whole


if __name__ == "__main__":
    absltest.main()
