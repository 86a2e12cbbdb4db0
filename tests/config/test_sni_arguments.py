"""config/sni_arguments.py: the --sni_* flags of fine_tune_t5.py --benchmark sni, their ranges, and the SNISpec
data/sni.py reads built from them field by field, with nanoT5's defaults."""
import dataclasses

from absl.testing import absltest, parameterized

from t5kit.config.sni_arguments import SNIArguments
from t5kit.errors import UsageError
from t5kit.specs import SNISpec


class SNIFlagsTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("no_instances", dict(sni_max_num_instances_per_task=0), r"--sni_max_num_instances_per_task=0 must be >= 1"),
        ("negative_examples", dict(sni_num_pos_examples=-1), r"--sni_num_pos_examples=-1 must be >= 0"),
    )
    def test_flags_out_of_range_are_refused(self, values, message):
        with self.assertRaisesRegex(UsageError, message):
            SNIArguments(**values).check_sni_flags()

    @parameterized.named_parameters(
        ("eval_instances", dict(sni_max_num_instances_per_eval_task=-2),
         r"^--sni_max_num_instances_per_eval_task=-2 must be >= 1, or -1 for all instances$"),
        ("negative_examples_shown", dict(sni_num_neg_examples=-3), r"^--sni_num_neg_examples=-3 must be >= 0$"))
    def test_each_range_names_its_flag(self, values, message):
        with self.assertRaisesRegex(UsageError, message):
            SNIArguments(**values).check_sni_flags()

    @parameterized.named_parameters(("all_instances", dict(sni_max_num_instances_per_task=-1,
                                                           sni_max_num_instances_per_eval_task=-1)),
                                    ("no_examples", dict(sni_num_pos_examples=0, sni_num_neg_examples=0)),
                                    ("one_instance", dict(sni_max_num_instances_per_task=1)))
    def test_edges_of_the_ranges_are_accepted(self, values):
        self.assertIsNone(SNIArguments(**values).check_sni_flags())

    def test_the_spec_is_every_flag_without_its_prefix(self):
        flags = [f.name.removeprefix("sni_") for f in dataclasses.fields(SNIArguments)]
        self.assertCountEqual(flags, [f.name for f in dataclasses.fields(SNISpec)])
        self.assertEqual(SNIArguments().sni_spec(), SNISpec())  # the same defaults on both sides
        spec = SNIArguments(sni_split_dir="/ni/splits/xlingual", sni_max_num_instances_per_task=-1,
                            sni_add_task_name=True, sni_num_neg_examples=2, sni_english_only=False).sni_spec()
        self.assertEqual((spec.split_dir, spec.max_num_instances_per_task, spec.add_task_name, spec.num_neg_examples,
                          spec.english_only), ("/ni/splits/xlingual", -1, True, 2, False))

    def test_defaults_are_nanot5s_fine_tuning_settings(self):
        """nanoT5/configs/task/ft.yaml: 100 instances per task, 2 positive examples, no negative ones, the task's
        definition but not its name, no explanations."""
        spec = SNIArguments().sni_spec()
        self.assertEqual((spec.max_num_instances_per_task, spec.max_num_instances_per_eval_task, spec.num_pos_examples,
                          spec.num_neg_examples, spec.add_task_definition, spec.add_task_name, spec.add_explanation),
                         (100, 100, 2, 0, True, False, False))


if __name__ == "__main__":
    absltest.main()
