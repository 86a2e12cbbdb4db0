"""How much can a corpus's word statistics alone give SST-2? A ceiling for what pre-trained embeddings could carry.

    python bench/word_statistics.py --model runs/bench_quality/pretrain --corpus runs/bench_quality/corpus/train.txt
    python bench/word_statistics.py --model runs/bench_quality/pretrain --corpus runs/bench_quality/corpus/train.txt \
        --with_sst2_train --finetune_overrides='--max_steps 100 --warmup_steps 20'

Why: when no pre-trained T5 fine-tunes better than random init (docs/quality-diagnostics.md), is the model failing to
learn what the text offers, or does the text not offer it? Word vectors from co-occurrence counts (PPMI + SVD, Levy
et al. 2015) are the cheapest strong learner of word similarity; fine-tuning from them bounds what word-level knowledge
of this corpus is worth.
1. Counts: the corpus (and, with --with_sst2_train, SST-2's training sentences without their labels) tokenised by
   --model's tokenizer; co-occurrence within --window ids, weighted 1/distance.
2. Vectors: positive PMI with context smoothing 0.75, truncated SVD to d_model, rows scaled to the mean row norm
   of a random init.
3. Model: bench/transfer_parts.py's random init (seed 0) of --model's shape with these vectors as its embeddings,
   written to --work_dir/word_vectors.
4. transfer_parts on that model, parts "embeddings" (the word vectors, the rest random) and "none" (random init):
   the linear probe and SST-2 fine-tuning per seed.
"""
import argparse
from pathlib import Path

import numpy as np
import torch
from transformers import T5ForConditionalGeneration

from bench import transfer_parts
from bench.paths import ROOT
from t5kit.model.building import load_tokenizer, new_t5_model
from t5kit.model.word_vectors import cooccurrence, ppmi_vectors, set_embeddings

TOKENIZE_LINES = 2000


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="A model folder whose shape and tokenizer to use.")
    parser.add_argument("--corpus", nargs="+", required=True, help="Text files, one document or line per line.")
    parser.add_argument("--with_sst2_train", action="store_true",
                        help="Add SST-2's training sentences (no labels) to the counts: task-adaptive statistics.")
    parser.add_argument("--window", type=int, default=5, help="Co-occurrence window, ids either side.")
    parser.add_argument("--work_dir", default="runs/bench_word_statistics", help="Everything the run writes goes here.")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--finetune_overrides", default="--max_steps 300",
                        help="Extra fine_tune_t5.py flags, one string.")
    parser.add_argument("--reuse", action="store_true", help="Keep finished fine-tunes in --work_dir.")
    return parser.parse_args(argv)


def corpus_ids(tokenizer, lines) -> np.ndarray:
    """Every line's ids, each line closed by EOS so windows do not join unrelated lines silently."""
    ids = []
    for start in range(0, len(lines), TOKENIZE_LINES):
        for row in tokenizer(lines[start:start + TOKENIZE_LINES], add_special_tokens=False)["input_ids"]:
            ids.extend(row + [tokenizer.eos_token_id])
    return np.asarray(ids, dtype=np.int64)


def write_word_vector_model(source, vectors, folder):
    """transfer_parts' random init (seed 0) of source's shape, embeddings replaced by `vectors` at its row norm; ids
    the counts never saw (padding rows of the vocabulary, for one) keep their random rows."""
    config = T5ForConditionalGeneration.from_pretrained(source).config
    torch.manual_seed(0)
    model = new_t5_model(config)
    set_embeddings(model, vectors)
    model.save_pretrained(folder)
    load_tokenizer(str(source)).save_pretrained(folder)
    return folder


def main(argv=None):
    args = parse_args(argv)
    work = (ROOT / args.work_dir).resolve()
    tokenizer = load_tokenizer(args.model)

    # 1. Counts.
    lines = [line for path in args.corpus for line in Path(path).read_text(encoding="utf-8").splitlines()
             if line.strip()]
    if args.with_sst2_train:
        lines += transfer_parts.sst2_rows("train.tsv")[0]  # formatted as fine-tuning reads them; no labels
    ids = corpus_ids(tokenizer, lines)
    print(f"counts over {len(ids):,} ids ({len(lines):,} lines), window {args.window}")
    config = T5ForConditionalGeneration.from_pretrained(args.model).config
    # the model's vocabulary may be padded past the tokenizer's: count over the model's rows
    counts = cooccurrence(ids, config.vocab_size, args.window)

    # 2.-3. Vectors, and the model that carries them.
    folder = write_word_vector_model(args.model, ppmi_vectors(counts, config.d_model), work / "word_vectors")

    # 4. Probe and fine-tuning, through transfer_parts.
    transfer_parts.main(["--model", str(folder), "--work_dir", str(work / "transfer"), "--parts", "embeddings",
                         "none", "--seeds", *map(str, args.seeds), "--finetune_overrides", args.finetune_overrides,
                         *(["--reuse"] if args.reuse else [])])


if __name__ == "__main__":
    main()
