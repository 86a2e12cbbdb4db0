"""Multi-task mixtures as in the T5 paper (Raffel et al. 2020, section 3.5.2 "Multi-task learning").

Rates: examples-proportional mixing with an artificial dataset size limit K,
    r_m = min(e_m, K) / sum_n min(e_n, K),
then temperature mixing raises each r_m to 1/T and renormalises (T = 1 leaves them unchanged; K is applied first,
as in the paper).

Sampling is an explicit sampler, not datasets.interleave_datasets: each example of the mixture draws its task
with probability r_m, and each task yields its examples in shuffled passes, reshuffled every time it runs out,
as T5's seqio mixtures repeat and shuffle each task. The draw is one numpy call per task, reproducible from the
seed, and the result is an index list into the concatenated tasks, so the mixture stays a map-style Dataset that
Trainer can shuffle and length-group (interleave_datasets' map-style mode stops at the first or last exhausted
task instead of repeating each one at its rate).
"""
import logging
import math

import datasets
import numpy as np

logger = logging.getLogger(__name__)


def mixing_rates(sizes, cap, temperature=1.0) -> np.ndarray:
    """(M,) rates summing to 1: examples-proportional with cap K, then temperature scaling."""
    capped = np.minimum(np.asarray(sizes, dtype=np.float64), cap)
    rates = capped / capped.sum()
    scaled = rates ** (1.0 / temperature)
    return scaled / scaled.sum()


def mixture_size(sizes, cap) -> int:
    """Examples in one pass over the mixture: every task counted up to the cap, sum_m min(e_m, K)."""
    return int(sum(min(size, cap) for size in sizes))


def sample_mixture(sizes, rates, num_examples, seed) -> np.ndarray:
    """(num_examples,) indices into the concatenation of the tasks: a task drawn per example by its rate, then
    that task's next example from shuffled passes over it."""
    rng = np.random.default_rng(seed)
    task_of_example = rng.choice(len(sizes), size=num_examples, p=rates)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    indices = np.empty(num_examples, dtype=np.int64)
    for task, size in enumerate(sizes):
        positions = np.flatnonzero(task_of_example == task)
        passes = math.ceil(len(positions) / size)
        order = np.concatenate([rng.permutation(size) for _ in range(passes)] or [np.zeros(0, np.int64)])
        indices[positions] = offsets[task] + order[:len(positions)]
    return indices


def mix_task_datasets(task_datasets, names, cap, temperature, seed):
    """(mixture Dataset, {name: rate}): one pass of sum_m min(e_m, K) examples drawn by the T5 rates."""
    sizes = [len(dataset) for dataset in task_datasets]
    rates = mixing_rates(sizes, cap, temperature)
    num_examples = mixture_size(sizes, cap)
    indices = sample_mixture(sizes, rates, num_examples, seed)
    for name, size, rate in zip(names, sizes, rates):
        logger.info("mixture: %s %d examples, rate %.4f (~%d per pass of %d)", name, size, rate,
                    round(rate * num_examples), num_examples)
    mixture = datasets.concatenate_datasets(list(task_datasets)).select(indices)
    return mixture, dict(zip(names, rates.tolist()))


def build_train_dataset(train_splits, cap, temperature, seed):
    """The one task's training set, or the T5 mixture of several (task_mixture.py); plus the mixing rates."""
    if len(train_splits) <= 1:
        return (train_splits[0].dataset if train_splits else None), None
    return mix_task_datasets([split.dataset for split in train_splits], [split.key for split in train_splits],
                             cap, temperature, seed)
