"""Corpora for pre-training: load (local files or hub, optionally streamed), tokenise (cached), pack windows.

Packing concatenates every document (each ending with EOS) and cuts the stream into windows of exactly
`tokens_length` tokens: no padding, and nothing is dropped but the final remainder.
"""
import codecs
import contextlib
import functools
import hashlib
import logging
import math
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pyarrow as pa
from datasets.exceptions import DatasetGenerationError
from datasets.fingerprint import Hasher

from t5kit.data.window_stream import WindowStream
from t5kit.errors import UsageError
from t5kit.specs import FILE_BUILDERS, CorpusSpec

logger = logging.getLogger(__name__)

TOKENIZE_BATCH_SIZE = 1000  # documents per tokenizer call: big enough for the fast tokenizer's parallelism
# What datasets/pyarrow/pandas raise for a file whose contents do not parse as its suffix says (broken JSON or CSV,
# not parquet, not UTF-8). Map-style loads wrap them in DatasetGenerationError; streams raise them as they read.
READ_ERRORS = (DatasetGenerationError, pa.ArrowException, pd.errors.ParserError, UnicodeDecodeError)
TEXT_DTYPES = ("string", "large_string")
DECODE_CHUNK_BYTES = 1 << 20


def _builder_and_kwargs(files, spec):
    """The datasets builder for local files plus the options their type needs."""
    suffix = Path(files[0]).suffix.lower()
    builder = FILE_BUILDERS[suffix]
    kwargs = {} if builder == "parquet" else {"encoding": spec.encoding}
    if builder == "text":
        kwargs["sample_by"] = spec.sample_by
    if suffix == ".tsv":
        kwargs["delimiter"] = "\t"
    return builder, kwargs


def _names(files, limit=3):
    """The files for a message: the first few, then how many more."""
    shown = ", ".join(map(str, files[:limit]))
    return shown + (f" (+{len(files) - limit} more)" if len(files) > limit else "")


def undecodable_file(files, encoding):
    """(file, byte offset) of the first file that is not text in `encoding`, or None. Read in chunks: it runs only
    once reading failed, and a corpus file can be gigabytes."""
    for path in files:
        decoder, offset = codecs.getincrementaldecoder(encoding)(), 0
        with open(path, "rb") as handle:
            try:
                for chunk in iter(lambda: handle.read(DECODE_CHUNK_BYTES), b""):
                    decoder.decode(chunk)
                    offset += len(chunk)
                decoder.decode(b"", final=True)
            except UnicodeDecodeError as err:
                return path, offset + max(err.start, 0)
    return None


def _decode_error(err):
    """The UnicodeDecodeError behind an error datasets raised, or None."""
    while err is not None:
        if isinstance(err, UnicodeDecodeError):
            return err
        err = err.__cause__ or err.__context__
    return None


def read_error(err, source, files=(), encoding="utf-8"):
    """The one-line UsageError for an error datasets raised reading corpus files (unreadable, empty, or a file that
    is not text in --encoding, named exactly), or None for any other error (a bug, a bad option)."""
    if isinstance(err, READ_ERRORS):
        bad = undecodable_file(files, encoding) if _decode_error(err) is not None else None
        if bad is not None:
            flag = source.split()[0]
            return UsageError(f"{flag} {bad[0]}: not {encoding} text (byte {bad[1]}); pass --encoding with its "
                              "encoding (e.g. latin-1, as some Project Gutenberg books are) or convert it")
        cause = str(err.__cause__ or err).strip().splitlines() or [type(err).__name__]
        return UsageError(f"{source}: cannot be read ({cause[0][:200]}); fix the file, or give it the suffix of its "
                          "real type")
    # datasets' only signal that a file parsed to zero rows (a header-only CSV, a blank text file).
    if isinstance(err, ValueError) and "corresponds to no data" in str(err):
        return UsageError(f"{source}: holds no documents; add text or drop the file")
    return None


@contextlib.contextmanager
def reading(source, files=(), encoding="utf-8"):
    """Raises read_error's one line for what datasets raises inside; anything else keeps its traceback."""
    try:
        yield
    except (*READ_ERRORS, ValueError) as err:
        usage_error = read_error(err, source, files, encoding)
        if usage_error is None:
            raise
        raise usage_error from None


def _load_files(flag, files, split, spec):
    """One split of local files, with the options of its own builder (train and validation may differ in type)."""
    builder, kwargs = _builder_and_kwargs(files, spec)
    with reading(f"{flag} {_names(files)}", files, spec.encoding):
        return datasets.load_dataset(builder, data_files={split: list(files)}, split=split, cache_dir=spec.cache_dir,
                                     streaming=spec.streaming, **kwargs)


def load_raw_corpus(spec: CorpusSpec):
    """Returns {"train": ..., "validation": ... or None} of raw documents (Dataset or IterableDataset)."""
    if spec.dataset_name:
        try:
            raw = datasets.load_dataset(spec.dataset_name, spec.dataset_config_name, cache_dir=spec.cache_dir,
                                        streaming=spec.streaming, trust_remote_code=spec.trust_remote_code)
        except (FileNotFoundError, ConnectionError, ValueError) as err:
            raise UsageError(f"cannot load --dataset_name {spec.dataset_name!r}: "
                             f"{str(err).splitlines()[0]}") from None
        return {"train": raw["train"], "validation": raw.get("validation")}
    train = _load_files("--train_files", spec.train_files, "train", spec)
    validation = None
    if spec.validation_files:
        validation = _load_files("--validation_files", spec.validation_files, "validation", spec)
    return {"train": train, "validation": validation}


def column_names(dataset):
    """Columns of a dataset; a stream of local files only knows them after reading its first row."""
    return dataset.column_names or list(next(iter(dataset)).keys())


def check_text_column(dataset, text_column, source, files=(), encoding="utf-8"):
    """Refuses a corpus without the text column (listing the columns it has) or whose column is not text; a stream's
    first row is read here so that a file that cannot be read fails now, in one line, not mid-training."""
    first = None
    if isinstance(dataset, datasets.IterableDataset):
        with reading(source, files, encoding):
            first = next(iter(dataset), None)
        if first is None:
            raise UsageError(f"{source}: holds no documents; add text or drop the file")
    columns = dataset.column_names or list(first)
    if text_column not in columns:
        raise UsageError(f"--text_column {text_column!r} is not a column of {source}; columns: {', '.join(columns)}")
    feature = (dataset.features or {}).get(text_column)
    dtype = getattr(feature, "dtype", type(feature).__name__) if feature is not None else \
        type(first[text_column]).__name__
    if dtype not in TEXT_DTYPES + ("str", "NoneType", "null"):
        raise UsageError(f"--text_column {text_column!r} of {source} holds {dtype} values, not text; "
                         "name a text column or quote the values")


def split_off_validation(train, percentage, seed, source="the training data"):
    """Holds out `percentage` % of the training documents (shuffled with the run's seed) for validation."""
    held_out = math.ceil(len(train) * percentage / 100.0)  # datasets' own rounding of test_size
    if held_out >= len(train):
        raise UsageError(f"--validation_split_percentage={percentage} of the {len(train)} document(s) of {source} "
                         "leaves none to train on; add documents or pass --validation_files")
    split = train.train_test_split(test_size=percentage / 100.0, seed=seed)
    return split["train"], split["test"]


def tokenize_documents(dataset, tokenizer, text_column, num_proc=None, overwrite_cache=False, append_eos=True):
    """Tokenises each document, EOS appended unless `append_eos` is False (--document_separator none); blank and
    null documents are dropped (nothing to learn from). Map-style results are cached by datasets (the cache key
    includes append_eos)."""

    def tokenize(batch):
        texts = [text for text in batch[text_column] if text and not text.isspace()]
        if not texts:  # the tokenizer fails on an empty batch
            return {"input_ids": []}
        # A T5 tokenizer's only special token is the EOS it appends.
        return {"input_ids": tokenizer(texts, add_special_tokens=append_eos, verbose=False)["input_ids"]}

    kwargs = dict(batched=True, batch_size=TOKENIZE_BATCH_SIZE, remove_columns=column_names(dataset))
    if isinstance(dataset, datasets.IterableDataset):
        return dataset.map(tokenize, **kwargs)
    fingerprint = tokenize_fingerprint(dataset, tokenizer, tokenize, text_column, append_eos)
    return dataset.map(tokenize, num_proc=num_proc, load_from_cache_file=not overwrite_cache,
                       new_fingerprint=fingerprint, desc="Tokenising", **kwargs)


def tokenize_fingerprint(dataset, tokenizer, tokenize, *options):
    """The tokenised dataset's cache key: the documents' fingerprint, the tokenizer's serialised form (its vocabulary,
    normaliser, pre- and post-processor: milliseconds to hash), the function's code and its options. datasets' own key
    pickles the tokenizer inside the function, ~0.1 s a split at every run's start. None (datasets' key) for a
    tokenizer without a serialised form."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    tokenizer_hash = hashlib.sha256(backend.to_str().encode()).hexdigest()
    return Hasher.hash([dataset._fingerprint, tokenizer_hash, tokenize.__code__, TOKENIZE_BATCH_SIZE, *options])


def pack_windows(tokenized, tokens_length, source=None):
    """Concatenates all documents and cuts windows of exactly tokens_length ids (map-style, zero-copy)."""
    # A map that kept no document (all blank) leaves no input_ids column at all.
    empty = pa.array([], pa.list_(pa.int32()))
    column = tokenized.data.column("input_ids").combine_chunks() if len(tokenized) else empty
    flat = column.flatten()  # every token of the corpus, in order: (N,)
    num_windows = len(flat) // tokens_length
    if num_windows == 0:
        prefix = f"{source}: " if source else ""
        raise UsageError(f"{prefix}corpus has {len(flat)} tokens, shorter than one window of {tokens_length}; "
                         "add text or lower --input_length")
    windows = pa.FixedSizeListArray.from_arrays(flat.slice(0, num_windows * tokens_length), tokens_length)
    logger.info("packed %d tokens into %d windows of %d (dropped the final %d)", len(flat), num_windows,
                tokens_length, len(flat) - num_windows * tokens_length)
    # numpy rows: the collator stacks arrays ~2x faster than lists of Python ints (bench/collator.py).
    return datasets.Dataset(pa.table({"input_ids": windows})).with_format("numpy")


def _sources(spec):
    """How messages name the training and the validation data: the flag and its files (or the hub corpus)."""
    if spec.dataset_name:
        return (f"--dataset_name {spec.dataset_name} (train split)",
                f"--dataset_name {spec.dataset_name} (validation split)")
    return (f"--train_files {_names(spec.train_files)}",
            f"--validation_files {_names(spec.validation_files or [])}")


def build_pretraining_datasets(spec: CorpusSpec, tokenizer, tokens_length, main_process_first=None):
    """Loads, tokenises and packs the corpus; returns (train, eval, counts): datasets of tokens_length windows
    (streams: WindowStream) and the documents and windows of each split (None where a stream leaves them
    unknown), for the model card and metrics.json. main_process_first(desc=...): the training arguments' context in
    which the main process tokenises first and the others read its cache (None: one process)."""
    raw = load_raw_corpus(spec)
    train_source, validation_source = _sources(spec)
    check_text_column(raw["train"], spec.text_column, train_source, spec.train_files or (),
                      spec.encoding)
    if raw["validation"] is not None:
        check_text_column(raw["validation"], spec.text_column, validation_source,
                          spec.validation_files or (), spec.encoding)
    train, validation = raw["train"], raw["validation"]
    if spec.max_train_samples is not None:
        train = train.take(spec.max_train_samples) if spec.streaming else \
            train.select(range(min(spec.max_train_samples, len(train))))
    if validation is None and not spec.streaming:
        train, validation = split_off_validation(train, spec.validation_split_percentage, spec.seed, train_source)

    if spec.streaming:
        train, validation = stream_windows(train, validation, tokenizer, tokens_length, spec)
        counts = {"train_documents": None, "train_windows": None, "validation_documents": None,
                  "validation_windows": len(validation) if hasattr(validation, "__len__") else None}
        return train, validation, counts

    counts = {}

    def tokenize_and_pack(dataset, source, split):
        tokenized = tokenize_documents(dataset, tokenizer, spec.text_column,
                                       spec.preprocessing_num_workers, spec.overwrite_cache,
                                       append_eos=spec.document_separator == "eos")
        windows = pack_windows(tokenized, tokens_length, source)
        counts.update({f"{split}_documents": len(tokenized), f"{split}_windows": len(windows)})
        return windows

    desc = "tokenising and packing the corpus"
    with contextlib.nullcontext() if main_process_first is None else main_process_first(desc=desc):
        train = tokenize_and_pack(train, train_source, "train")
        # A held-out split comes from the training files.
        validation_source = validation_source if raw["validation"] is not None else train_source
        validation = tokenize_and_pack(validation, validation_source, "validation") if validation is not None \
            else None
    if spec.max_eval_samples is not None:
        validation = validation.select(range(min(spec.max_eval_samples, len(validation))))
        counts["validation_windows"] = len(validation)
    return train, validation, counts


def stream_windows(train, validation, tokenizer, tokens_length, spec):
    """Streams: windows cut as documents arrive, each with a position to resume from (window_stream.py).
    Without a validation split, the first --max_eval_samples windows are held out (and kept in memory)."""
    limit = spec.max_eval_samples

    # One tokenising pipeline per use. Pipelines over the same raw stream share datasets' iteration state, so the
    # held-out windows are read here, before training starts iterating.
    def documents(dataset):
        return tokenize_documents(dataset, tokenizer, spec.text_column,
                                  append_eos=spec.document_separator == "eos")

    # A file that turns out unreadable further down the stream is named in one line too, whenever it is reached.
    train_source, validation_source = _sources(spec)
    explain_train = functools.partial(read_error, source=train_source, files=spec.train_files or (),
                                      encoding=spec.encoding)
    if validation is not None:
        explain_validation = functools.partial(read_error, source=validation_source,
                                               files=spec.validation_files or (), encoding=spec.encoding)
        return (WindowStream(documents(train), tokens_length, explain_error=explain_train),
                WindowStream(documents(validation), tokens_length, max_windows=limit, with_positions=False,
                                   explain_error=explain_validation))
    if not limit:
        raise UsageError("--streaming without a validation split needs --max_eval_samples N "
                         "(N windows held out from the start of the stream) or --validation_files")
    held_out = [row["input_ids"] for row in WindowStream(documents(train), tokens_length, max_windows=limit,
                                                               with_positions=False, explain_error=explain_train)]
    if len(held_out) < limit:
        raise UsageError(f"--max_eval_samples {limit}: the stream has only {len(held_out)} windows of "
                         f"{tokens_length} tokens ({_sources(spec)[0]}); lower it or add --validation_files")
    validation = datasets.Dataset.from_dict({"input_ids": np.stack(held_out)}).with_format("numpy")
    return WindowStream(documents(train), tokens_length, skip_windows=limit,
                              explain_error=explain_train), validation
