"""data/predict_inputs.py: the task predict_t5.py formats inputs with (the model card's, --task, or none), and span
filling of a span-corruption prediction."""
from absl.testing import absltest, parameterized

from t5kit.data import predict_inputs
from t5kit.errors import UsageError


class TaskChoiceTest(parameterized.TestCase):

    def test_the_card_task_is_the_default_and_task_none_overrides_it(self):
        card = {"tasks": ["glue/rte"]}
        self.assertEqual(predict_inputs.resolve_task(None, card)["name"], "glue/rte")
        self.assertIsNone(predict_inputs.resolve_task("none", card))
        self.assertEqual(predict_inputs.resolve_task("boolq", card)["name"], "super_glue/boolq")
        self.assertIsNone(predict_inputs.resolve_task(None, {}))

    def test_a_multi_task_card_needs_task(self):
        with self.assertRaisesRegex(UsageError, r"the model card lists 2 tasks \(glue/sst2, glue/rte\); pass --task"):
            predict_inputs.resolve_task(None, {"tasks": ["glue/sst2", "glue/rte"]})

    def test_a_yaml_declared_task_comes_back_from_the_card(self):
        spec = {"task_type": "classification", "prefix": "triage:", "text_column_name": "text",
                "label_column_name": "team", "labels": {"a": "billing", "b": "bugs"}, "metric_names": ["accuracy"],
                "metric_to_optimize": "accuracy"}
        task = predict_inputs.resolve_task(None, {"tasks": ["custom/triage"], "custom_tasks": {"custom/triage": spec}})
        self.assertEqual((task["name"], task["prefix"], task["labels"]), ("custom/triage", "triage:", spec["labels"]))


class SpanFillingTest(parameterized.TestCase):

    @parameterized.named_parameters(
        ("two_spans", "The <extra_id_0> walks in <extra_id_1> park.",
         "<extra_id_0> big dog<extra_id_1> the<extra_id_2>", "The big dog walks in the park."),
        ("a_span_missing", "A <extra_id_0> day <extra_id_1>.", "<extra_id_0> sunny", "A sunny day ."),
        ("repeated_sentinel_keeps_the_first", "x <extra_id_0> y", "<extra_id_0> a <extra_id_0> b", "x a y"))
    def test_fill_spans(self, text, prediction, filled):
        self.assertEqual(predict_inputs.fill_spans(text, prediction), filled)


if __name__ == "__main__":
    absltest.main()
