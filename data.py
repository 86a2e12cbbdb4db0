"""Corpora for pre-training: load (local files or hub, optionally streamed), tokenise (cached), pack windows.

Packing concatenates every document (each ending with EOS) and cuts the stream into windows of exactly
`tokens_length` tokens: no padding, and nothing is dropped but the final remainder.
"""
import logging
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa

from flags import UsageError
from packed_stream import PackedWindowStream
from run_flags import FILE_BUILDERS

logger = logging.getLogger(__name__)

TOKENIZE_BATCH_SIZE = 1000  # documents per tokenizer call: big enough for the fast tokenizer's parallelism


def _builder_and_kwargs(files, data_args):
    """The datasets builder for local files plus the options their type needs."""
    suffix = Path(files[0]).suffix.lower()
    builder = FILE_BUILDERS[suffix]
    kwargs = {}
    if builder == "text":
        kwargs["sample_by"] = data_args.sample_by
    if suffix == ".tsv":
        kwargs["delimiter"] = "\t"
    return builder, kwargs


def load_raw_corpus(data_args, cache_dir=None, trust_remote_code=False):
    """Returns {"train": ..., "validation": ... or None} of raw documents (Dataset or IterableDataset)."""
    if data_args.dataset_name:
        try:
            raw = datasets.load_dataset(data_args.dataset_name, data_args.dataset_config_name, cache_dir=cache_dir,
                                        streaming=data_args.streaming, trust_remote_code=trust_remote_code)
        except (FileNotFoundError, ConnectionError, ValueError) as err:
            raise UsageError(f"cannot load --dataset_name {data_args.dataset_name!r}: "
                             f"{str(err).splitlines()[0]}") from None
        return {"train": raw["train"], "validation": raw.get("validation")}
    builder, kwargs = _builder_and_kwargs(data_args.train_files, data_args)
    load = dict(cache_dir=cache_dir, streaming=data_args.streaming, **kwargs)
    train = datasets.load_dataset(builder, data_files={"train": data_args.train_files}, split="train", **load)
    validation = None
    if data_args.validation_files:
        builder, kwargs = _builder_and_kwargs(data_args.validation_files, data_args)
        load.update(kwargs)
        validation = datasets.load_dataset(builder, data_files={"validation": data_args.validation_files},
                                           split="validation", **load)
    return {"train": train, "validation": validation}


def column_names(dataset):
    """Columns of a dataset; a stream of local files only knows them after reading its first row."""
    return dataset.column_names or list(next(iter(dataset)).keys())


def check_text_column(dataset, text_column, split):
    """Refuses a corpus without the text column, listing the columns it has."""
    columns = column_names(dataset)
    if text_column not in columns:
        raise UsageError(f"--text_column {text_column!r} is not a column of the {split} data; "
                         f"columns: {', '.join(columns)}")


def split_off_validation(train, percentage, seed):
    """Holds out `percentage` % of the training documents (shuffled with the run's seed) for validation."""
    split = train.train_test_split(test_size=percentage / 100.0, seed=seed)
    return split["train"], split["test"]


def tokenize_documents(dataset, tokenizer, text_column, num_proc=None, overwrite_cache=False):
    """Tokenises each non-blank document, EOS appended; map-style results are cached by datasets."""

    def tokenize(batch):
        texts = [text for text in batch[text_column] if text and not text.isspace()]
        return {"input_ids": tokenizer(texts, add_special_tokens=True, verbose=False)["input_ids"]}

    kwargs = dict(batched=True, batch_size=TOKENIZE_BATCH_SIZE, remove_columns=column_names(dataset))
    if isinstance(dataset, datasets.IterableDataset):
        return dataset.map(tokenize, **kwargs)
    return dataset.map(tokenize, num_proc=num_proc, load_from_cache_file=not overwrite_cache,
                       desc="Tokenising", **kwargs)


def pack_windows(tokenized, tokens_length):
    """Concatenates all documents and cuts windows of exactly tokens_length ids (map-style, zero-copy)."""
    column = tokenized.data.column("input_ids").combine_chunks()
    flat = column.flatten()  # every token of the corpus, in order: (N,)
    num_windows = len(flat) // tokens_length
    if num_windows == 0:
        raise UsageError(f"corpus has {len(flat)} tokens, shorter than one window of {tokens_length}; "
                         "add text or lower --input_length")
    windows = pa.FixedSizeListArray.from_arrays(flat.slice(0, num_windows * tokens_length), tokens_length)
    logger.info("packed %d tokens into %d windows of %d (dropped the final %d)", len(flat), num_windows,
                tokens_length, len(flat) - num_windows * tokens_length)
    # numpy rows: the collator stacks arrays ~2x faster than lists of Python ints (bench/collator.py).
    return datasets.Dataset(pa.table({"input_ids": windows})).with_format("numpy")


def build_pretraining_datasets(data_args, tokenizer, tokens_length, training_args, cache_dir=None,
                               trust_remote_code=False):
    """Loads, tokenises and packs the corpus; returns (train, eval) datasets of tokens_length windows (streams:
    PackedWindowStream)."""
    raw = load_raw_corpus(data_args, cache_dir, trust_remote_code)
    check_text_column(raw["train"], data_args.text_column, "training")
    train, validation = raw["train"], raw["validation"]
    if data_args.max_train_samples is not None:
        train = train.take(data_args.max_train_samples) if data_args.streaming else \
            train.select(range(min(data_args.max_train_samples, len(train))))
    if validation is None and not data_args.streaming:
        train, validation = split_off_validation(train, data_args.validation_split_percentage, training_args.seed)
    if validation is not None:
        check_text_column(validation, data_args.text_column, "validation")

    if data_args.streaming:
        return stream_windows(train, validation, tokenizer, tokens_length, data_args, training_args)

    def tokenize_and_pack(dataset):
        tokenized = tokenize_documents(dataset, tokenizer, data_args.text_column,
                                       data_args.preprocessing_num_workers, data_args.overwrite_cache)
        return pack_windows(tokenized, tokens_length)

    with training_args.main_process_first(desc="tokenising and packing the corpus"):
        train = tokenize_and_pack(train)
        validation = tokenize_and_pack(validation) if validation is not None else None
    if data_args.max_eval_samples is not None:
        validation = validation.select(range(min(data_args.max_eval_samples, len(validation))))
    return train, validation


def stream_windows(train, validation, tokenizer, tokens_length, data_args, training_args):
    """Streams: windows cut as documents arrive, each with a position to resume from (packed_stream.py).
    Without a validation split, the first --max_eval_samples windows are held out (and kept in memory)."""
    if training_args.dataloader_num_workers:
        raise UsageError("--streaming needs --dataloader_num_workers 0: the stream position that makes resume "
                         "exact is kept in the main process")
    limit = data_args.max_eval_samples

    # One tokenising pipeline per use. Pipelines over the same raw stream share datasets' iteration state, so the
    # held-out windows are read here, before training starts iterating.
    def documents(dataset):
        return tokenize_documents(dataset, tokenizer, data_args.text_column)

    if validation is not None:
        return (PackedWindowStream(documents(train), tokens_length),
                PackedWindowStream(documents(validation), tokens_length, max_windows=limit, with_positions=False))
    if not limit:
        raise UsageError("--streaming without a validation split needs --max_eval_samples N "
                         "(N windows held out from the start of the stream) or --validation_files")
    held_out = [row["input_ids"] for row in PackedWindowStream(documents(train), tokens_length, max_windows=limit,
                                                               with_positions=False)]
    if len(held_out) < limit:
        raise UsageError(f"--max_eval_samples {limit}: the stream has only {len(held_out)} windows of "
                         f"{tokens_length} tokens; lower it or add --validation_files")
    validation = datasets.Dataset.from_dict({"input_ids": np.stack(held_out)}).with_format("numpy")
    return PackedWindowStream(documents(train), tokens_length, skip_windows=limit), validation
