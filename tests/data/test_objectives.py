"""data/objectives.py, the objective owner: each objective's shapes are those of its own length maths (T5's
compute_input_and_target_lengths, UL2's mixture and packed lengths), its collator gives rows of those shapes, and
what the run record and model card get follows from them."""
import copy

import numpy as np
from absl.testing import absltest, parameterized

import constants
from data_collator import compute_input_and_target_lengths
from t5kit.data import objectives, ul2
from t5kit.errors import UsageError
from t5kit.model import building
from t5kit.specs import ObjectiveSpec
from tests.helpers import in_memory_t5_tokenizer, random_word_ids


def spec(name, input_length=512, packed=False, window=None):
    denoisers = {"span_corruption": (), "ul2": constants.UL2_DENOISERS, "prefix_lm": constants.PREFIX_LM_DENOISERS}
    filled = [dict({"mean_noise_span_length": None, "mode_token": constants.UL2_MODE_TOKENS[d["paradigm"]]}, **d)
              for d in denoisers[name]]
    return ObjectiveSpec(name, input_length, constants.NOISE_DENSITY, constants.MEAN_NOISE_SPAN_LENGTH,
                         tuple(filled), packed, window)


class ObjectiveTest(parameterized.TestCase):

    def test_every_objective_flag_choice_has_an_owner(self):
        self.assertEqual(tuple(objectives.OBJECTIVES), constants.OBJECTIVES)

    def test_span_corruption_takes_t5s_lengths(self):
        objective = objectives.build(spec("span_corruption"))
        self.assertEqual((objective.tokens_length, objective.row_shape), (568, (512, 114)))
        self.assertEqual((objective.tokens_length, objective.target_length),
                         compute_input_and_target_lengths(512, 0.15, 3.0))
        self.assertEqual(objective.derived(), {"tokens_length": 568, "input_length": 512, "target_length": 114})
        self.assertEqual(objective.mode_tokens, [])
        self.assertFalse(objective.packable or objective.continues_text)

    def test_ul2_takes_the_mixture_lengths_and_its_paradigm_tokens(self):
        objective = objectives.build(spec("ul2"))
        self.assertEqual((objective.tokens_length, objective.row_shape), (511, (512, 342)))
        self.assertEqual(objective.mode_tokens, ["[NLU]", "[NLG]", "[S2S]"])
        self.assertNotIn("packing_window_input_length", objective.derived())

    def test_packed_ul2_cuts_short_windows_into_rows_of_the_input_length(self):
        objective = objectives.build(spec("ul2", packed=True))
        window_inputs, tokens_length, window_targets, target_length = ul2.packed_lengths(512, objective.denoisers)
        self.assertEqual((objective.tokens_length, objective.window_shape, objective.row_shape),
                         (tokens_length, (window_inputs, window_targets), (512, target_length)))
        self.assertEqual(objective.derived()["packing_window_input_length"], 51)  # a tenth of 512
        self.assertEqual(objectives.build(spec("ul2", packed=True, window=64)).window_shape[0], 64)

    @parameterized.named_parameters(("span_corruption", "span_corruption"), ("ul2", "ul2"),
                                    ("prefix_lm", "prefix_lm"), ("ul2_packed", "ul2", True))
    def test_the_collator_gives_rows_of_the_window_shapes(self, name, packed=False):
        objective = objectives.build(spec(name, input_length=64, packed=packed))
        tokenizer = copy.deepcopy(in_memory_t5_tokenizer())  # the cached one is shared: left as it is
        building.add_mode_tokens(tokenizer, objective.mode_tokens)
        collator = objective.collator(tokenizer, seed=3)
        windows = random_word_ids(4 * objective.tokens_length).reshape(4, objective.tokens_length)
        batch = collator([{"input_ids": window} for window in windows])
        shape = getattr(objective, "window_shape", objective.row_shape)
        self.assertEqual(tuple(batch["input_ids"].shape), (4, shape[0]))
        self.assertEqual(tuple(batch["labels"].shape), (4, shape[1]))
        again = objective.collator(tokenizer, seed=3)([{"input_ids": window} for window in windows])
        np.testing.assert_array_equal(np.asarray(batch["labels"]), np.asarray(again["labels"]))  # keyed by seed

    def test_the_card_section_names_the_settings(self):
        text, table = objectives.build(spec("span_corruption")).card_section()
        self.assertIn("windows of 568 tokens, 15% of them in noise spans of mean length 3.0", text)
        self.assertIsNone(table)
        text, (header, rows) = objectives.build(spec("ul2", packed=True)).card_section()
        self.assertIn("packed several to a row", text)
        self.assertEqual((header[0], len(rows)), ("paradigm", 7))
        self.assertTrue(objectives.build(spec("prefix_lm")).continues_text)

    def test_an_input_length_too_short_is_refused_in_one_line(self):
        with self.assertRaisesRegex(UsageError, "--input_length=4 is too short for span corruption"):
            objectives.build(spec("ul2", input_length=4))


if __name__ == "__main__":
    absltest.main()
