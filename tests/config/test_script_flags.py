"""config/script_flags.py: each of the six entry scripts' flag classes, and the checks that read two groups, run by
parsing.parse_flags for whoever parses (an entry script, a sweep's check of its parameters, a test)."""
from absl.testing import absltest, parameterized

from t5kit.config import parsing, script_flags
from t5kit.errors import UsageError
from tests.helpers import ENTRY_SCRIPTS, require, tiny_flags, tiny_run_flags


class ScriptFlagsTest(parameterized.TestCase):

    def test_every_entry_script_has_its_flag_classes(self):
        self.assertCountEqual([name.removesuffix(".py") for name in script_flags.FLAG_CLASSES_BY_SCRIPT],
                              ENTRY_SCRIPTS)
        for classes in script_flags.FLAG_CLASSES_BY_SCRIPT.values():
            self.assertIsInstance(classes, parsing.Program)

    def test_a_program_runs_its_cross_checks_once_every_group_is_valid(self):
        seen = []
        program = parsing.Program(script_flags.TOKENIZER_FLAG_CLASSES, cross_checks=(seen.append,))
        corpus = str(require("gutenberg/austen-persuasion.txt"))
        (args,) = parsing.parse_flags(program, ["--train_files", corpus, "--output_dir", "/tmp/unused"])
        self.assertEqual(seen, [args])

    @parameterized.named_parameters(
        ("packing_span_corruption", dict(packing=True), "--packing true with --objective span_corruption"),
        ("packing_window_alone", dict(packing_window_input_length=16), "--packing_window_input_length applies to"),
        ("streaming_workers", dict(streaming=True, dataloader_num_workers=2), "--streaming needs --dataloader_num"),
        ("word_vectors_from_a_model", dict(init_embeddings="word_vectors", model_name_or_path="x"),
         "--init_embeddings word_vectors starts a new model"))
    def test_pre_training_refuses_a_bad_combination_at_parse_time(self, flags, message):
        argv = tiny_run_flags("/tmp/unused", str(require("gutenberg/austen-persuasion.txt")), **flags)
        with self.assertRaisesRegex(UsageError, message):
            parsing.parse_flags(script_flags.PRETRAIN_FLAG_CLASSES, argv)

    @parameterized.named_parameters(
        ("pre_training_z_loss", "PRETRAIN_FLAG_CLASSES", dict(z_loss=1e-4), "which --z_loss reads"),
        ("fine_tuning_label_smoothing", "FINETUNE_FLAG_CLASSES", dict(label_smoothing_factor=0.1),
         "which --label_smoothing_factor reads"),
        ("negative", "PRETRAIN_FLAG_CLASSES", dict(loss_chunk_tokens=-1), "--loss_chunk_tokens=-1 must be >= 0"))
    def test_loss_chunks_are_refused_where_a_step_needs_its_logits(self, program, flags, message):
        flags = {"loss_chunk_tokens": 4096, **flags}
        corpus = str(require("gutenberg/austen-persuasion.txt"))
        argv = (tiny_run_flags("/tmp/unused", corpus, **flags) if program.startswith("PRETRAIN")
                else tiny_flags("/tmp/unused", **flags))
        with self.assertRaisesRegex(UsageError, message):
            parsing.parse_flags(getattr(script_flags, program), argv)

    def test_fine_tuning_refuses_lora_without_a_model_at_parse_time(self):
        with self.assertRaisesRegex(UsageError, "--peft lora adapts an existing model"):
            parsing.parse_flags(script_flags.FINETUNE_FLAG_CLASSES, tiny_flags("/tmp/unused", peft="lora"))


if __name__ == "__main__":
    absltest.main()
