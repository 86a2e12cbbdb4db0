"""A tiny T5 trained for seconds on a GLUE mixture with the real T5 tokenizer, for tests that compare two ways of
predicting (torch and CTranslate2, eager and compiled generation): an untrained model emits one degenerate string
for every input, which cannot show a difference; this one's outputs follow its inputs and end at EOS after a few
tokens. trained_tiny_model() trains it once per test run for the classes that share it."""
import functools
import random

import torch

from t5kit.data import predict_inputs, task_format
from t5kit.model import building
from tests.helpers import built_once, require

TRAIN_TASKS = ("cola", "sst2", "mrpc", "stsb", "rte", "wnli")  # QNLI's train.tsv is not in ../shared/data
TRAIN_ROWS, TRAIN_STEPS, TRAIN_BATCH = 300, 200, 16


def training_pairs():
    """(input, target) of the first TRAIN_ROWS rows of each GLUE training set, in the task's text-to-text format."""
    pairs = []
    for task in TRAIN_TASKS:
        task_vals = task_format.find_task(task)
        rows, _ = predict_inputs.read_rows(require("glue") / task_vals["data_dir_name"] / "train.tsv", task_vals)
        converted = [task_format.convert_file_row(task_vals, raw) for _, raw in rows[:TRAIN_ROWS + 20] if raw]
        pairs += [(task_format.format_input(task_vals, row), task_format.format_target(task_vals, row))
                  for row in converted if row][:TRAIN_ROWS]
    return pairs


def train_tiny_model(folder):
    """A t5-tiny trained TRAIN_STEPS steps on the GLUE mixture (seconds on one thread), saved with its tokenizer in
    `folder`; returns the last step's loss."""
    tokenizer = building.load_tokenizer(str(require("t5_spiece")))
    torch.manual_seed(0)
    config = building.build_t5_config("t5-tiny", tokenizer)
    # One layer a stack: Inductor's cold build of its generation step grows with the graph (the compiled tests).
    config.num_layers = config.num_decoder_layers = 1
    model = building.new_t5_model(config)
    pairs = training_pairs()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    rng = random.Random(0)
    model.train()
    for _ in range(TRAIN_STEPS):
        batch = rng.sample(pairs, TRAIN_BATCH)
        inputs = tokenizer([p[0] for p in batch], padding=True, truncation=True, max_length=48, return_tensors="pt")
        labels = tokenizer([p[1] for p in batch], padding=True, return_tensors="pt").input_ids
        labels[labels == tokenizer.pad_token_id] = -100
        loss = model(**inputs, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return float(loss.detach())


@functools.cache
def trained_tiny_model():
    """(folder, last step's loss) of train_tiny_model's model, trained once per test run (~11 s on one thread; the
    first worker to need it trains it, helpers.built_once): the classes comparing two ways of predicting read it, and
    none writes into it."""
    return built_once("trained_tiny_model", train_tiny_model)
