"""data/task_mixture.py: T5's examples-proportional mixing rates (cap, temperature), the sampled mixture's proportions,
and one capped pass over each task."""
import math

import datasets
import numpy as np
from absl.testing import absltest, parameterized

from t5kit.data.task_mixture import mix_task_datasets, mixing_rates, mixture_size, sample_mixture


class MixingRatesTest(parameterized.TestCase):
    """T5 paper sec. 3.5.2: r_m = min(e_m, K) / sum min(e_n, K), then r_m^(1/T) renormalised."""

    @parameterized.named_parameters(
        ("examples_proportional", 10 ** 9, 1.0, [100 / 11100, 1000 / 11100, 10000 / 11100]),
        ("capped", 1000, 1.0, [1 / 21, 10 / 21, 10 / 21]),
        ("capped_temperature_2", 1000, 2.0, [1 / (1 + 2 * math.sqrt(10)), math.sqrt(10) / (1 + 2 * math.sqrt(10)),
                                            math.sqrt(10) / (1 + 2 * math.sqrt(10))]),
        ("uncapped_temperature_2", 10 ** 9, 2.0, [10 / (10 + math.sqrt(1000) + 100),
                                                  math.sqrt(1000) / (10 + math.sqrt(1000) + 100),
                                                  100 / (10 + math.sqrt(1000) + 100)]),
    )
    def test_rates_follow_the_formula(self, cap, temperature, expected):
        np.testing.assert_allclose(mixing_rates([100, 1000, 10000], cap, temperature), expected, rtol=1e-12)

    def test_high_temperature_approaches_equal_mixing(self):
        np.testing.assert_allclose(mixing_rates([100, 1000, 10000], 10 ** 9, 1e6), [1 / 3] * 3, atol=1e-4)

    def test_mixture_size_counts_each_task_up_to_the_cap(self):
        self.assertEqual(mixture_size([100, 1000, 10000], 1000), 2100)

    @parameterized.named_parameters(("proportional_capped", 500, 1.0), ("temperature_3", 500, 3.0))
    def test_sampled_proportions_match_the_rates(self, cap, temperature):
        sizes = [50, 500, 5000]
        rates = mixing_rates(sizes, cap, temperature)
        indices = sample_mixture(sizes, rates, 200_000, seed=0)
        task = np.searchsorted(np.cumsum(sizes), indices, side="right")
        np.testing.assert_allclose(np.bincount(task, minlength=3) / len(indices), rates, atol=0.005)
        # The small task repeats in shuffled passes: every example drawn as often as every other, +-1.
        counts = np.bincount(indices[task == 0], minlength=sizes[0])
        self.assertLessEqual(counts.max() - counts.min(), 1)

    def test_mix_task_datasets_draws_one_capped_pass(self):
        small = datasets.Dataset.from_dict({"input_ids": [[1, 1]] * 4})
        large = datasets.Dataset.from_dict({"input_ids": [[2, 2, 1]] * 40})
        mixture, rates = mix_task_datasets([small, large], ["small", "large"], cap=10, temperature=1.0, seed=1)
        self.assertLen(mixture, 14)
        self.assertEqual(rates, {"small": 4 / 14, "large": 10 / 14})
        self.assertContainsSubset({len(ids) for ids in mixture["input_ids"]}, {2, 3})


if __name__ == "__main__":
    absltest.main()
