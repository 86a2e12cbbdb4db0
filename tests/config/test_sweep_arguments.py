"""config/sweep_arguments.py: sweep.py's own flags (the sweep YAML is read by sweep/space.py): their defaults and
the two ranges they check, each refusal one line naming the flag."""
from absl.testing import absltest, parameterized

from t5kit.config.output_arguments import OutputDirArguments
from t5kit.config.sweep_arguments import SweepArguments
from t5kit.errors import UsageError


class SweepFlagsTest(parameterized.TestCase):

    def test_defaults_leave_the_yaml_and_the_storage_to_decide(self):
        args = SweepArguments()
        self.assertEqual((args.storage, args.study_name, args.trials, args.seed, args.heartbeat_interval,
                          args.report, args.output_dir), (None, None, None, None, 60.0, False, None))
        self.assertIsInstance(args, OutputDirArguments)  # --output_dir is the shared group's: the sweep folder

    @parameterized.named_parameters(("one_trial", dict(trials=1)), ("short_heartbeat", dict(heartbeat_interval=0.1)),
                                    ("report_only", dict(report=True, storage="sqlite:///s.db", study_name="s")))
    def test_accepted(self, values):
        args = SweepArguments(**values)
        for name, value in values.items():
            self.assertEqual(getattr(args, name), value)

    @parameterized.named_parameters(
        ("no_trials", dict(trials=0), "^--trials=0 must be >= 1$"),
        ("negative_trials", dict(trials=-5), "^--trials=-5 must be >= 1$"),
        ("no_heartbeat", dict(heartbeat_interval=0.0), "^--heartbeat_interval=0.0 must be > 0$"),
        ("negative_heartbeat", dict(heartbeat_interval=-1.0), "^--heartbeat_interval=-1.0 must be > 0$"))
    def test_refusals_name_the_flag(self, values, message):
        with self.assertRaisesRegex(UsageError, message):
            SweepArguments(**values)


if __name__ == "__main__":
    absltest.main()
