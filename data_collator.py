"""T5 span corruption: the length math and a batch-vectorised collator.

A window of `tokens_length` ids becomes an encoder input of `input_length` ids (each noise span replaced by one
sentinel, then EOS) and a target of `target_length` ids (each kept span replaced by one sentinel, then EOS):

    tokens_length, target_length = compute_input_and_target_lengths(512, 0.15, 3.0)  # (568, 114)
    collator = DataCollatorForT5SpanCorruption(tokenizer, input_length=512, target_length=target_length, seed=0)
    batch = collator([{"input_ids": window} for window in windows])  # input_ids (B, 512), labels (B, 114)

The masking follows `random_spans_noise_mask` in google-research/text-to-text-transfer-transformer
t5/data/preprocessors.py @ 84f8bcc14b5f2c03de51bd3587609ba8f6bbd1cd: a fixed number of noise tokens and spans per
window, all masks with those counts equally likely. Unlike HF's per-example port, every row of a batch is drawn at
once with numpy.

In training the random draws are keyed, not streamed: each window's mask is a pure function of (seed, epoch,
the window's ids), computed with a counter-based hash (splitmix64). So the masks do not depend on batch size,
gradient accumulation, world size, DataLoader workers or where a run was resumed: a 2-process run, a GA=2 run
and a resumed run all see exactly the masks of the plain run. (A window repeated within one epoch gets the
same mask; a new epoch draws new ones.)
"""
import logging
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

import constants
from t5kit.errors import UsageError
from t5kit.specs import check_span_settings

logger = logging.getLogger(__name__)
LABEL_PAD_ID = -100  # labels the loss ignores (HF's ignore index; T5 weights out its padded targets the same way)


def compute_input_and_target_lengths(inputs_length, noise_density, mean_noise_span_length):
    """Returns (tokens_length, targets_length): the raw window length that corrupts to exactly `inputs_length`
    ids (EOS included), and the length of the matching targets (EOS included).

    Follows `random_spans_helper` in google-research/text-to-text-transfer-transformer t5/data/preprocessors.py
    as it reads on its main branch (extra_tokens_per_span_inputs = extra_tokens_per_span_targets = 1): the search
    starts at inputs_length - 1, so T5's own test case (64, 0.2, 1.0) gives (63, 27) and (64, 0.2, 2.0) gives
    (70, 22). (HF's run_t5_mlm_flax.py copy starts at inputs_length, which overshoots by one token whenever a
    window of inputs_length ids has as many noise spans as noise tokens: every mean span of 1.) Like T5's helper it
    rounds Python floats (float64, half to even); the noise mask itself rounds in float32 (count_noise).
    """

    def _inputs_and_targets_length(tokens_length):
        num_noise_tokens = int(round(tokens_length * noise_density))
        num_nonnoise_tokens = tokens_length - num_noise_tokens
        num_noise_spans = int(round(num_noise_tokens / mean_noise_span_length))
        # Inputs keep the non-noise tokens plus one sentinel per noise span; targets the reverse; both get EOS.
        return num_nonnoise_tokens + num_noise_spans + 1, num_noise_tokens + num_noise_spans + 1

    tokens_length = inputs_length - 1
    while _inputs_and_targets_length(tokens_length + 1)[0] <= inputs_length:
        tokens_length += 1
    inputs_length, targets_length = _inputs_and_targets_length(tokens_length)
    # T5's hack: at density 0.5 make targets as long as inputs, which are more likely a round number.
    if noise_density == 0.5 and targets_length > inputs_length:
        tokens_length -= 1
        targets_length -= 1
    return tokens_length, targets_length


def count_noise(length, noise_density, mean_noise_span_length):
    """Returns (num_noise_tokens, num_noise_spans) for a window of `length` ids, as T5's random_spans_noise_mask:
    noise tokens clipped to [1, length - 1] so both kinds exist, and at least one span.

    The mask rounds in TF float32, half to even (to_int(tf.round(to_float(length) * noise_density)), then
    to_float(num_noise_tokens) / mean_noise_span_length), unlike the length helper's Python floats: a product that
    is a half in float64 is not one in float32. float32(190) * float32(0.15) = 28.500002 gives 29 noise tokens
    where 190 * 0.15 = 28.5 gives 28; so windows of the helper's tokens_length can hold a noise token and a span
    more than the helper counted (at 0.15, 3.0: input lengths 172, 316, 352, 604, 640, ...). numpy's float32
    product and np.rint (half to even) reproduce TF's ops exactly."""
    num_noise_tokens = int(np.rint(np.float32(length) * np.float32(noise_density)))
    num_noise_tokens = min(max(num_noise_tokens, 1), length - 1)
    num_noise_spans = int(np.rint(np.float32(num_noise_tokens) / np.float32(mean_noise_span_length)))
    return num_noise_tokens, max(num_noise_spans, 1)


def check_kept_spans(length, noise_density, mean_noise_span_length, denoiser=None):
    """count_noise's (num_noise_tokens, num_noise_spans), refusing settings whose noise spans outnumber the kept
    tokens of a window of `length` ids (T5's _random_segmentation needs one kept token per kept span). One wording
    for span corruption's flags and each UL2 span denoiser (`denoiser`: its name, "X(mu=1, r=0.9)")."""
    noise, spans = count_noise(length, noise_density, mean_noise_span_length)
    if length - noise < spans:
        settings, density, span = ((f"--denoisers {denoiser}", "its noise_density", "its mean_noise_span_length")
                                   if denoiser else (f"--noise_density={noise_density} with --mean_noise_span_length="
                                                     f"{mean_noise_span_length}", "--noise_density",
                                                     "--mean_noise_span_length"))
        raise UsageError(f"{settings} needs {spans} kept spans in windows of {length} ids but leaves {length - noise} "
                         f"kept tokens; lower {density} or raise {span}")
    return noise, spans


def draw_gap_picks(rng, batch_size, num_noise_tokens, num_kept_tokens, num_spans):
    """The random draws of both segmentations, (B, 2 * (num_spans - 1)), from a numpy generator in one call."""
    lows, highs = gap_pick_bounds(num_noise_tokens, num_kept_tokens, num_spans)
    return rng.integers(lows, highs, size=(batch_size, len(lows)))


def gap_pick_bounds(num_noise_tokens, num_kept_tokens, num_spans):
    """Bounds (lows, highs) of the 2 * (num_spans - 1) uniform draws of both segmentations: the partial
    Fisher-Yates step i over n - 1 gaps picks from [i, n - 1)."""
    steps = np.arange(num_spans - 1)
    lows = np.concatenate([steps, steps])
    highs = np.concatenate([np.full(num_spans - 1, num_noise_tokens - 1), np.full(num_spans - 1, num_kept_tokens - 1)])
    return lows, highs


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio: splitmix64's increment


def splitmix64(values):
    """splitmix64's output function (Steele, Lea & Flood 2014) on a uint64 array: a bijective, well-mixed hash."""
    with np.errstate(over="ignore"):
        z = values + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def window_keys(input_ids, seed, epoch):
    """(B,) uint64 keys, one per window, from its ids, the seed and the epoch. The ids go through a linear hash
    with odd per-position multipliers (one multiply-add per id, so order matters), then splitmix64 mixes."""
    multipliers = splitmix64(np.arange(input_ids.shape[1], dtype=np.uint64)) | np.uint64(1)  # (T,), odd
    with np.errstate(over="ignore"):
        content = (input_ids.astype(np.uint64) * multipliers).sum(axis=1, dtype=np.uint64)  # (B,)
        return splitmix64(splitmix64(content ^ np.uint64(seed)) + np.uint64(epoch))


def keyed_gap_picks(keys, num_noise_tokens, num_kept_tokens, num_spans):
    """draw_gap_picks with the randomness taken from per-window keys: (B, 2 * (num_spans - 1)) picks. The modulo
    bias is below range / 2^64 (< 1e-16 at any window length), far under any test's resolution."""
    lows, highs = gap_pick_bounds(num_noise_tokens, num_kept_tokens, num_spans)
    counters = np.arange(1, len(lows) + 1, dtype=np.uint64) * _GOLDEN
    with np.errstate(over="ignore"):
        bits = splitmix64(keys[:, None] + counters[None, :])  # (B, 2 * (num_spans - 1))
    return lows + (bits % (highs - lows).astype(np.uint64)).astype(np.int64)


def random_segmentation_starts(picks, num_items, num_segments):
    """Start offsets (B, num_segments) of a uniformly random split of `num_items` items into `num_segments`
    non-empty segments, per row. T5 shuffles num_segments - 1 "new segment" marks over the num_items - 1 gaps;
    a partial Fisher-Yates shuffle of the gaps picks the same uniform subset with one step per segment, not per
    item, and each step serves the whole batch. picks[:, step] is uniform in [step, num_items - 1)."""
    batch_size = len(picks)
    gaps = np.tile(np.arange(num_items - 1), (batch_size, 1))  # (B, num_items - 1)
    rows = np.arange(batch_size)
    for step in range(num_segments - 1):  # swap a uniform pick from gaps[:, step:] into column `step`
        picked = gaps[rows, picks[:, step]]
        gaps[rows, picks[:, step]] = gaps[:, step]
        gaps[:, step] = picked
    starts = np.zeros((batch_size, num_segments), dtype=np.int64)
    starts[:, 1:] = np.sort(gaps[:, :num_segments - 1], axis=1) + 1  # gap g lies before item g + 1
    return starts


def random_span_numbers(rng, batch_size, length, noise_density, mean_noise_span_length):
    """(B, length) int32 span numbers drawn from a numpy generator (see span_numbers_from_picks)."""
    num_noise_tokens, num_spans = count_noise(length, noise_density, mean_noise_span_length)
    picks = draw_gap_picks(rng, batch_size, num_noise_tokens, length - num_noise_tokens, num_spans)
    return span_numbers_from_picks(picks, length, num_noise_tokens, num_spans)


def span_numbers_from_picks(picks, length, num_noise_tokens, num_spans):
    """(B, length) int32: the span each token belongs to, counting in T5's interleaved order kept_0, noise_0,
    kept_1, noise_1, ..., noise_{k-1}. Odd numbers are noise; span number // 2 picks the sentinel."""
    batch_size = len(picks)
    noise_starts = random_segmentation_starts(picks[:, :num_spans - 1], num_noise_tokens, num_spans)  # (B, spans)
    kept_starts = random_segmentation_starts(picks[:, num_spans - 1:], length - num_noise_tokens, num_spans)
    # Kept span i starts after kept spans and noise spans 0..i-1; noise span i after kept spans 0..i and
    # noise spans 0..i-1.
    kept_ends = np.concatenate([kept_starts[:, 1:], np.full((batch_size, 1), length - num_noise_tokens)], 1)
    is_start = np.zeros((batch_size, length), dtype=np.int8)  # 1 where any span but kept_0 starts
    rows = np.arange(batch_size)[:, None]
    is_start[rows, kept_starts[:, 1:] + noise_starts[:, 1:]] = 1
    is_start[rows, kept_ends + noise_starts] = 1
    return np.cumsum(is_start, axis=1, dtype=np.int32)


def random_spans_noise_mask(rng, batch_size, length, noise_density, mean_noise_span_length):
    """Boolean noise mask (B, length) as T5's random_spans_noise_mask, for B windows at once."""
    return random_span_numbers(rng, batch_size, length, noise_density, mean_noise_span_length) % 2 == 1


def corrupt_spans(input_ids, span_numbers, sentinel_ids, eos_id):
    """(B, T) ids and span numbers -> (inputs, labels). Inputs: noise span i becomes sentinel_ids[i]; labels:
    kept span i becomes sentinel_ids[i]; both end in EOS. Every row keeps the same count (fixed span counts)."""
    noise = (span_numbers & 1).astype(bool)  # (B, T)
    sentinels = sentinel_ids[span_numbers >> 1]  # (B, T): sentinel of the kept/noise pair each token is in
    span_start = np.ones_like(noise)
    span_start[:, 1:] = span_numbers[:, 1:] != span_numbers[:, :-1]
    eos = np.full((len(input_ids), 1), eos_id, dtype=input_ids.dtype)
    inputs = np.where(noise, sentinels, input_ids)[~noise | span_start].reshape(len(input_ids), -1)
    labels = np.where(noise, input_ids, sentinels)[noise | span_start].reshape(len(input_ids), -1)
    return np.concatenate([inputs, eos], axis=1), np.concatenate([labels, eos], axis=1)


def fit_length(rows, length, fill):
    """(B, T) rows that end in EOS, cut or padded with `fill` to (B, length), as T5 does: seqio's
    append_eos_after_trim cuts a sequence to length - 1 before it appends EOS (so EOS stays last), and the feature
    converter pads."""
    if rows.shape[1] > length:
        return np.concatenate([rows[:, :length - 1], rows[:, -1:]], axis=1)
    return np.pad(rows, ((0, 0), (0, length - rows.shape[1])), constant_values=fill)


def shift_right(labels, decoder_start_token_id):
    """Decoder inputs (B, L): labels shifted one step right behind the start token (T5's teacher forcing)."""
    return np.concatenate([np.full((len(labels), 1), decoder_start_token_id, labels.dtype), labels[:, :-1]], 1)


@dataclass
class DataCollatorForT5SpanCorruption:
    """Collates windows of `tokens_length` ids into T5 span-corruption batches of fixed shape.

    `tokens_length` follows from input_length, noise_density and mean_noise_span_length; `target_length` must be
    what they produce (use compute_input_and_target_lengths). Masks are keyed by (seed, epoch, window ids): two
    collators with the same seed corrupt a window identically whatever the batching; `set_epoch` (called by the
    training loop at each epoch) draws new masks for the next pass. seed None picks a random seed once.
    `decoder_start_token_id` defaults to the tokenizer's pad id, T5's decoder start token.
    """

    tokenizer: Any
    noise_density: float = constants.NOISE_DENSITY
    mean_noise_span_length: float = constants.MEAN_NOISE_SPAN_LENGTH
    input_length: int = constants.INPUT_LENGTH
    target_length: int = 114  # compute_input_and_target_lengths(512, 0.15, 3.0)[1]
    seed: Optional[int] = None
    return_tensors: str = "pt"
    decoder_start_token_id: Optional[int] = None
    tokens_length: Optional[int] = None  # the window length; None: computed here from the three settings above

    def __post_init__(self):
        self._check_flags()
        if self.tokens_length is None:
            self.tokens_length, _ = compute_input_and_target_lengths(
                self.input_length, self.noise_density, self.mean_noise_span_length)
        num_noise_tokens, num_spans = check_kept_spans(self.tokens_length, self.noise_density,
                                                       self.mean_noise_span_length)
        self._check_lengths(num_noise_tokens, num_spans)
        self.sentinel_ids = self._lookup_sentinels(num_spans)  # (num_spans,)
        self.eos_id, self.pad_id = self.tokenizer.eos_token_id, self.tokenizer.pad_token_id
        if self.eos_id is None or self.pad_id is None:
            raise UsageError(f"tokenizer {self._tokenizer_name()} has no eos or pad token; "
                             "use a T5 tokenizer or one from train_tokenizer.py")
        if self.decoder_start_token_id is None:
            self.decoder_start_token_id = self.pad_id
        if self.seed is None:
            self.seed = int(np.random.SeedSequence().generate_state(1, np.uint64)[0])
        self.epoch = 0
        self.num_noise_tokens, self.num_spans = num_noise_tokens, num_spans

    def set_epoch(self, epoch):
        """New masks for each pass over the data; the same epoch always gives the same masks (exact resume)."""
        self.epoch = int(epoch)

    def _check_flags(self):
        check_span_settings(self.noise_density, self.mean_noise_span_length, self.input_length)
        if self.return_tensors not in ("pt", "np"):
            raise UsageError(f"return_tensors={self.return_tensors!r} must be 'pt' or 'np'")

    def _check_lengths(self, num_noise_tokens, num_spans):
        """Shapes are fixed up front, so a flag combination that cannot produce them fails here, not mid-run. Where
        T5's length helper and T5's noise mask disagree (the mask keeps at least one noise token and one span and
        rounds in float32; the helper's density-0.5 step), windows of the helper's tokens_length corrupt to a few
        ids more or fewer than the helper's lengths: T5 then trims or pads them to the feature lengths, and so does
        this collator."""
        num_kept = self.tokens_length - num_noise_tokens
        self.raw_input_length, self.raw_target_length = num_kept + num_spans + 1, num_noise_tokens + num_spans + 1
        if (self.raw_input_length, self.raw_target_length) == (self.input_length, self.target_length):
            return
        tokens_length, target_length = compute_input_and_target_lengths(
            self.input_length, self.noise_density, self.mean_noise_span_length)
        if self.tokens_length != tokens_length:
            raise UsageError(f"--input_length={self.input_length} cannot be hit exactly at --noise_density="
                             f"{self.noise_density}, --mean_noise_span_length={self.mean_noise_span_length} (windows "
                             f"of {self.tokens_length} ids corrupt to {self.raw_input_length}); raise --input_length")
        if self.target_length != target_length:
            raise UsageError(f"target_length={self.target_length} does not match --input_length={self.input_length}, "
                             f"--noise_density={self.noise_density}, --mean_noise_span_length="
                             f"{self.mean_noise_span_length}: windows of {self.tokens_length} ids give targets of "
                             f"{target_length} (compute_input_and_target_lengths)")
        logger.warning("at --noise_density=%s, --mean_noise_span_length=%s T5's noise mask puts %d noise tokens in %d "
                       "span(s) into a window of %d ids, which corrupts to %d inputs and %d targets; they are cut or "
                       "padded to %d and %d, as T5 does (padding is masked out of attention and loss)",
                       self.noise_density, self.mean_noise_span_length, num_noise_tokens, num_spans,
                       self.tokens_length, self.raw_input_length, self.raw_target_length, self.input_length,
                       self.target_length)

    def _lookup_sentinels(self, num_spans):
        """Ids of <extra_id_0> .. <extra_id_{num_spans-1}>, by name: T5 numbers them downwards from the top of
        the vocabulary, other tokenizers may not, so no id is derived from the vocabulary size."""
        names = [f"<extra_id_{i}>" for i in range(num_spans)]
        ids = self.tokenizer.convert_tokens_to_ids(names)
        unk_id = self.tokenizer.unk_token_id
        missing = [name for name, i in zip(names, ids) if i is None or i == unk_id]
        if missing:
            raise UsageError(f"tokenizer {self._tokenizer_name()} lacks {missing[0]} ({len(missing)} of the "
                             f"{num_spans} sentinels needed at --input_length={self.input_length}); use a T5 "
                             "tokenizer or one from train_tokenizer.py")
        return np.asarray(ids, dtype=np.int64)

    def _tokenizer_name(self):
        return repr(getattr(self.tokenizer, "name_or_path", "") or type(self.tokenizer).__name__)

    def __call__(self, features, rng: Optional[np.random.Generator] = None):
        """features: list of {"input_ids": tokens_length ids}. Masks come from (seed, epoch, window ids), or from
        `rng` when one is given (draws streamed from that generator instead)."""
        input_ids = self._stack(features)  # (B, tokens_length)
        num_kept = self.tokens_length - self.num_noise_tokens
        if rng is None:
            keys = window_keys(input_ids, self.seed, self.epoch)  # (B,)
            picks = keyed_gap_picks(keys, self.num_noise_tokens, num_kept, self.num_spans)
        else:
            picks = draw_gap_picks(rng, len(input_ids), self.num_noise_tokens, num_kept, self.num_spans)
        span_numbers = span_numbers_from_picks(picks, self.tokens_length, self.num_noise_tokens,
                                               self.num_spans)  # (B, tokens_length)
        inputs, labels = corrupt_spans(input_ids, span_numbers, self.sentinel_ids, self.eos_id)
        # Our invariant: the length checks in __post_init__ fixed these shapes.
        assert inputs.shape[1] == self.raw_input_length, inputs.shape
        assert labels.shape[1] == self.raw_target_length, labels.shape
        batch = {"input_ids": fit_length(inputs, self.input_length, self.pad_id),  # (B, input_length)
                 "labels": fit_length(labels, self.target_length, LABEL_PAD_ID)}  # (B, target_length)
        if self.raw_input_length < self.input_length:
            batch["attention_mask"] = fit_length(np.ones_like(inputs), self.input_length, 0)  # (B, input_length)
        decoder_input_ids = shift_right(batch["labels"], self.decoder_start_token_id)  # (B, target_length)
        batch["decoder_input_ids"] = np.where(decoder_input_ids == LABEL_PAD_ID, self.pad_id, decoder_input_ids)
        if self.return_tensors == "pt":
            import torch  # here, so that the length math and the numpy path load without torch's import time

            batch = {key: torch.from_numpy(value) for key, value in batch.items()}
        return batch

    def _stack(self, features):
        """(B, tokens_length) int64, or a ValueError naming the expected window length."""
        lengths = {len(feature["input_ids"]) for feature in features}
        if lengths != {self.tokens_length}:
            raise ValueError(f"span corruption needs windows of exactly tokens_length={self.tokens_length} ids "
                             f"(compute_input_and_target_lengths({self.input_length}, {self.noise_density}, "
                             f"{self.mean_noise_span_length})), got lengths {sorted(lengths)}")
        # An explicit dtype skips numpy's type discovery: ~25 % faster on lists of Python ints.
        return np.array([feature["input_ids"] for feature in features], dtype=np.int64)
