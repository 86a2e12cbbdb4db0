"""UL2's mixture of denoisers and prefix-LM: the collators of --objective ul2 and --objective prefix_lm.

    tokens_length, target_length = mixture_lengths(512, denoisers)   # (511, 342) for UL2's default mixture
    collator = DataCollatorForUL2(tokenizer, denoisers, input_length=512, seed=0)
    batch = collator([{"input_ids": window} for window in windows])   # input_ids (B, 512), labels (B, 342)

A denoiser is a mapping {paradigm, noise_density, mean_noise_span_length, proportion, mode_token} (the config
layer fills and checks it; constants.UL2_DENOISERS is UL2's mixture). Each window gets one denoiser, drawn by the
proportions from a hash of (seed, epoch, window ids), as span corruption keys its masks (data_collator.py): batch
composition, gradient accumulation, the number of processes and the resume point change neither the denoiser
nor its mask.

- R and X denoisers (Tay et al. 2022, sec. 3.1.2) are T5 span corruption at their own noise_density and
  mean_noise_span_length: data_collator's keyed masks, so an R-denoiser row is exactly the span-corruption
  collator's row for the same window and settings, with the paradigm token in front.
- The S-denoiser is prefix-LM: the window is split once, inputs the prefix, targets the rest. The split follows
  T5's random_prefix_noise_mask (t5/data/preprocessors.py): the number of prefix tokens is uniform in
  [round((1 - 2 r) (L - 1)), L - 1], so the targets hold r of the window on average (r = noise_density <= 0.5).
- The paradigm token ([NLU], [NLG], [S2S]) is the first input token; EOS ends inputs and targets.

Shapes. The denoisers corrupt a window to different lengths, and an S split to a different length per row, so
batches have fixed padded shapes: one window length L for the whole mixture (the longest that every denoiser's
inputs fit into input_length), and target_length the longest targets any denoiser gives at L. Inputs are padded
with the pad id (attention_mask 0), labels with -100. UL2's default mixture at input_length 512: L = 511 (the
S-denoiser's longest prefix, EOS and [S2S] fill 512), target_length 342 (X: mu 3, r 0.5).
"""
import logging
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

import constants
from data_collator import (
    _GOLDEN,
    LABEL_PAD_ID,
    check_kept_spans,
    corrupt_spans,
    count_noise,
    keyed_gap_picks,
    shift_right,
    span_numbers_from_picks,
    splitmix64,
    window_keys,
)
from t5kit.data import packing
from t5kit.errors import UsageError
from t5kit.specs import check_span_settings

logger = logging.getLogger(__name__)
PREFIX_LM = "S"
PACKING_WINDOWS_PER_ROW = 10  # --packing's default window: its inputs fit a tenth of a row under every denoiser
MAX_WINDOW_FACTOR = 64  # the window-length search stops at 64 x input_length (corruption rates up to ~98 %)


def prefix_bounds(length, noise_density):
    """(fewest, most) prefix tokens of a window of `length` ids, as T5's random_prefix_noise_mask draws them."""
    most = length - 1
    return min(most, max(1, int(np.round((1 - 2 * noise_density) * most)))), most


def denoiser_lengths(length, denoiser):
    """(longest inputs, longest targets) a denoiser gives a window of `length` ids, EOS and paradigm token
    included. Span denoisers give exactly these lengths to every window."""
    mode = int(denoiser["mode_token"] is not None)
    if denoiser["paradigm"] == PREFIX_LM:
        fewest, most = prefix_bounds(length, denoiser["noise_density"])
        return most + 1 + mode, length - fewest + 1
    noise, spans = count_noise(length, denoiser["noise_density"], denoiser["mean_noise_span_length"])
    return length - noise + spans + 1 + mode, noise + spans + 1


def describe(denoiser):
    """'X(mu=64, r=0.5)' or 'S(r=0.25)': how messages and logs name a denoiser."""
    if denoiser["paradigm"] == PREFIX_LM:
        return f"S(r={denoiser['noise_density']})"
    return f"{denoiser['paradigm']}(mu={denoiser['mean_noise_span_length']:g}, r={denoiser['noise_density']})"


def mixture_lengths(input_length, denoisers):
    """(tokens_length, target_length): the longest window whose inputs fit `input_length` under every denoiser, and
    the longest targets any denoiser gives it. Refuses an input length span corruption does not take
    (specs.check_span_settings), or a span denoiser that needs more kept spans than the window keeps tokens
    (data_collator.check_kept_spans)."""
    def fits(length):
        return all(denoiser_lengths(length, d)[0] <= input_length for d in denoisers)

    # At the shortest input length a window of 2 ids fits every denoiser (at most 4 inputs with a paradigm token).
    check_span_settings(input_length=input_length)
    length = 2
    while length < MAX_WINDOW_FACTOR * input_length and fits(length + 1):
        length += 1
    for denoiser in denoisers:
        if denoiser["paradigm"] != PREFIX_LM:
            check_kept_spans(length, denoiser["noise_density"], denoiser["mean_noise_span_length"], describe(denoiser))
    return length, max(denoiser_lengths(length, d)[1] for d in denoisers)


def mean_lengths(length, denoisers):
    """(inputs, targets): the mixture's expected lengths of a window of `length` ids, paradigm token and EOS
    included (an S split's prefix is uniform in prefix_bounds)."""
    inputs = targets = 0.0
    for denoiser in denoisers:
        if denoiser["paradigm"] == PREFIX_LM:
            prefix = sum(prefix_bounds(length, denoiser["noise_density"])) / 2
            lengths = (prefix + 1 + int(denoiser["mode_token"] is not None), length - prefix + 1)
        else:
            lengths = denoiser_lengths(length, denoiser)
        inputs, targets = inputs + denoiser["proportion"] * lengths[0], targets + denoiser["proportion"] * lengths[1]
    return inputs, targets


def packed_lengths(input_length, denoisers, window_input_length=None):
    """(window_input_length, tokens_length, window_target_length, target_length) of --packing: windows whose inputs
    fit window_input_length (default a tenth of the row, at least constants.MIN_INPUT_LENGTH) under every denoiser,
    the longest targets they give, and
    the rows' target length: the row's inputs times the mixture's mean target/input ratio, so that inputs and
    targets fill up together (at least the longest targets, so that every window fits a row)."""
    window_input_length = window_input_length or max(constants.MIN_INPUT_LENGTH,
                                                     input_length // PACKING_WINDOWS_PER_ROW)
    tokens_length, window_target_length = mixture_lengths(window_input_length, denoisers)
    mean_inputs, mean_targets = mean_lengths(tokens_length, denoisers)
    target_length = packing.matched_target_length(input_length, mean_inputs, mean_targets, window_target_length)
    return window_input_length, tokens_length, window_target_length, target_length


def mode_tokens(denoisers):
    """The distinct paradigm tokens of a mixture, in order of first use."""
    return list(dict.fromkeys(d["mode_token"] for d in denoisers if d["mode_token"] is not None))


def choose(keys, thresholds):
    """(B,) denoiser index per window: a uniform draw in [0, 1) from each key (53 bits), placed among the
    cumulative proportions. Counter 0 of the key; the masks use counters 1, 2, ... (keyed_gap_picks)."""
    uniform = (splitmix64(keys) >> np.uint64(11)).astype(np.float64) / 2.0 ** 53
    return np.minimum(np.searchsorted(thresholds, uniform, side="right"), len(thresholds) - 1)


@dataclass
class DataCollatorForUL2:
    """Collates windows of `tokens_length` ids into UL2 batches of fixed shape (see module doc): input_ids and
    attention_mask (B, input_length), labels and decoder_input_ids (B, target_length). `denoisers` are filled,
    checked mappings (config/pretrain_arguments.py); the tokenizer must hold their paradigm tokens
    (model/building.add_mode_tokens). `set_epoch` draws new denoisers and masks for each pass."""

    tokenizer: Any
    denoisers: Sequence[dict]
    input_length: int = constants.INPUT_LENGTH
    seed: Optional[int] = None
    return_tensors: str = "pt"
    decoder_start_token_id: Optional[int] = None
    tokens_length: Optional[int] = None  # None: mixture_lengths(input_length, denoisers)
    target_length: Optional[int] = None

    def __post_init__(self):
        tokens_length, target_length = mixture_lengths(self.input_length, self.denoisers)
        if self.tokens_length not in (None, tokens_length) or self.target_length not in (None, target_length):
            raise UsageError(f"tokens_length={self.tokens_length}, target_length={self.target_length} do not match "
                             f"the denoisers at --input_length={self.input_length}: use mixture_lengths, which "
                             f"gives ({tokens_length}, {target_length})")
        self.tokens_length, self.target_length = tokens_length, target_length
        self.eos_id, self.pad_id = self.tokenizer.eos_token_id, self.tokenizer.pad_token_id
        if self.decoder_start_token_id is None:
            self.decoder_start_token_id = self.pad_id
        self.mode_ids = [None if d["mode_token"] is None else self._token_id(d["mode_token"], "paradigm token")
                         for d in self.denoisers]
        spans = [count_noise(tokens_length, d["noise_density"], d["mean_noise_span_length"])[1]
                 for d in self.denoisers if d["paradigm"] != PREFIX_LM]
        self.sentinel_ids = np.asarray([self._token_id(f"<extra_id_{i}>", "sentinel") for i in range(max(spans,
                                                                                                     default=0))],
                                       dtype=np.int64)
        self.thresholds = np.cumsum([d["proportion"] for d in self.denoisers])
        if self.seed is None:
            self.seed = int(np.random.SeedSequence().generate_state(1, np.uint64)[0])
        self.epoch = 0

    def _token_id(self, token, kind):
        token_id = self.tokenizer.convert_tokens_to_ids(token)
        if token_id is None or token_id == self.tokenizer.unk_token_id:
            raise UsageError(f"tokenizer {getattr(self.tokenizer, 'name_or_path', '')!r} lacks the {kind} {token} "
                             "the denoisers need; use a T5 tokenizer (paradigm tokens are added when missing)")
        return token_id

    def set_epoch(self, epoch):
        """New denoisers and masks for each pass; the same epoch always gives the same ones (exact resume)."""
        self.epoch = int(epoch)

    def denoiser_indices(self, input_ids):
        """(B,) the index into `denoisers` each window of (B, tokens_length) ids gets in this epoch."""
        return choose(window_keys(np.asarray(input_ids, dtype=np.int64), self.seed, self.epoch), self.thresholds)

    def example_lengths(self, input_ids, epoch=None):
        """(input lengths, target lengths), (B,) each: what each window of (B, tokens_length) ids corrupts to in
        `epoch` (default: the current one), paradigm token and EOS included, without padding. What a packing
        sampler places rows by, before the windows are corrupted."""
        input_ids = np.asarray(input_ids, dtype=np.int64)
        keys = window_keys(input_ids, self.seed, self.epoch if epoch is None else int(epoch))
        chosen = choose(keys, self.thresholds)
        inputs, targets = np.zeros(len(keys), np.int64), np.zeros(len(keys), np.int64)
        for index, denoiser in enumerate(self.denoisers):
            rows = np.flatnonzero(chosen == index)
            mode = int(self.mode_ids[index] is not None)
            if denoiser["paradigm"] == PREFIX_LM:
                prefix = self._prefix_lengths(keys[rows], denoiser)
                inputs[rows], targets[rows] = prefix + 1 + mode, self.tokens_length - prefix + 1
            else:
                inputs[rows], targets[rows] = denoiser_lengths(self.tokens_length, denoiser)
        return inputs, targets

    def __call__(self, features):
        input_ids = self._stack(features)  # (B, tokens_length)
        keys = window_keys(input_ids, self.seed, self.epoch)  # (B,)
        chosen = choose(keys, self.thresholds)
        batch_size = len(input_ids)
        inputs = np.full((batch_size, self.input_length), self.pad_id, dtype=np.int64)
        input_lengths = np.zeros(batch_size, dtype=np.int64)
        labels = np.full((batch_size, self.target_length), LABEL_PAD_ID, dtype=np.int64)
        for index, denoiser in enumerate(self.denoisers):
            rows = np.flatnonzero(chosen == index)
            if len(rows) == 0:
                continue
            corrupt = self._prefix_lm if denoiser["paradigm"] == PREFIX_LM else self._span_corruption
            inputs[rows], input_lengths[rows], labels[rows] = corrupt(input_ids[rows], keys[rows], denoiser,
                                                                      self.mode_ids[index])
        attention_mask = (np.arange(self.input_length)[None, :] < input_lengths[:, None]).astype(np.int64)
        decoder_input_ids = shift_right(labels, self.decoder_start_token_id)  # (B, target_length)
        batch = {"input_ids": inputs, "attention_mask": attention_mask, "labels": labels,
                 "decoder_input_ids": np.where(decoder_input_ids == LABEL_PAD_ID, self.pad_id, decoder_input_ids)}
        if self.return_tensors == "pt":
            import torch  # here, so that the numpy path loads without torch's import time

            batch = {key: torch.from_numpy(value) for key, value in batch.items()}
        return batch

    def _with_mode(self, rows, mode_id):
        if mode_id is None:
            return rows
        return np.concatenate([np.full((len(rows), 1), mode_id, dtype=rows.dtype), rows], axis=1)

    def _span_corruption(self, input_ids, keys, denoiser, mode_id):
        """Padded inputs (n, input_length), their length, padded labels (n, target_length): T5 span corruption."""
        length = self.tokens_length
        noise, spans = count_noise(length, denoiser["noise_density"], denoiser["mean_noise_span_length"])
        picks = keyed_gap_picks(keys, noise, length - noise, spans)
        span_numbers = span_numbers_from_picks(picks, length, noise, spans)  # (n, tokens_length)
        encoder, decoder = corrupt_spans(input_ids, span_numbers, self.sentinel_ids, self.eos_id)
        encoder = self._with_mode(encoder, mode_id)
        padded_inputs = np.pad(encoder, ((0, 0), (0, self.input_length - encoder.shape[1])),
                               constant_values=self.pad_id)
        padded_labels = np.pad(decoder, ((0, 0), (0, self.target_length - decoder.shape[1])),
                               constant_values=LABEL_PAD_ID)
        return padded_inputs, encoder.shape[1], padded_labels

    def _prefix_lm(self, input_ids, keys, denoiser, mode_id):
        """Padded inputs (mode token, prefix, EOS), their lengths, padded labels (rest of the window, EOS). The
        prefix length is uniform in prefix_bounds, drawn from counter 1 of each window's key."""
        length = self.tokens_length
        prefix = self._prefix_lengths(keys, denoiser)  # (n,)
        rows = np.arange(len(input_ids))[:, None]
        offset = int(mode_id is not None)
        position = np.arange(self.input_length)[None, :] - offset  # (1, input_length): index into the window
        encoder = np.where(position < prefix[:, None], input_ids[rows, np.clip(position, 0, length - 1)],
                           np.where(position == prefix[:, None], self.eos_id, self.pad_id))
        if mode_id is not None:
            encoder[:, 0] = mode_id
        position = np.arange(self.target_length)[None, :] + prefix[:, None]  # (n, target_length)
        decoder = np.where(position < length, input_ids[rows, np.minimum(position, length - 1)],
                           np.where(position == length, self.eos_id, LABEL_PAD_ID))
        return encoder, prefix + 1 + offset, decoder

    def _prefix_lengths(self, keys, denoiser):
        """(n,) prefix lengths of an S split, uniform in prefix_bounds, from counter 1 of each window's key."""
        fewest, most = prefix_bounds(self.tokens_length, denoiser["noise_density"])
        with np.errstate(over="ignore"):
            bits = splitmix64(keys + _GOLDEN)
        return fewest + (bits % np.uint64(most - fewest + 1)).astype(np.int64)

    def _stack(self, features):
        """(B, tokens_length) int64, or a ValueError naming the expected window length."""
        lengths = {len(feature["input_ids"]) for feature in features}
        if lengths != {self.tokens_length}:
            raise ValueError(f"the denoisers need windows of exactly tokens_length={self.tokens_length} ids "
                             f"(mixture_lengths({self.input_length}, ...)), got lengths {sorted(lengths)}")
        return np.array([feature["input_ids"] for feature in features], dtype=np.int64)
