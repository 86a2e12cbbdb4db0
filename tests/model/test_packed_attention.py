"""Packed batches (t5kit/model/packed_attention.py) compute exactly what the same examples compute one per row: the
per-token losses and the gradients of real examples (UL2's R, X and S rows, prefix-LM rows, a mixture of two GLUE
tasks) packed as the batch contract says, in fp32, with eager, sdpa and t5_flex attention (its FlexAttention block
mask too, forward on CPU), and for mT5 and UMT5; an unpacked batch runs bit for bit as without the hooks
(generation included); no example sees another (a block-mask check); what cannot take the masks is refused.
Packed rows' SDPA runs in bands (model/banded_attention.py) with the same per-token losses and gradients as the
dense masks on real UL2 rows (sdpa and t5_flex, with and without gradient checkpointing), bands really used by all
three attentions. (The bands' own layout, kernel and registration: tests/model/test_banded_attention.py.)"""
import copy
import csv
import functools
import itertools
import types
from unittest import mock

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import transformers
from absl.testing import absltest, parameterized
from torch.nn.attention.flex_attention import flex_attention

import constants
from t5kit.config.pretrain_arguments import check_denoisers
from t5kit.data import task_format, ul2
from t5kit.data.task_splits import truncate
from t5kit.errors import UsageError
from t5kit.model import banded_attention, building, packed_attention, t5_flex_attention
from tests.helpers import require

ATTENTIONS = ("eager", "sdpa", t5_flex_attention.NAME)
NAMED_ATTENTIONS = [(attention, attention) for attention in ATTENTIONS]
UL2_DENOISERS = check_denoisers(constants.UL2_DENOISERS, "ul2")
PREFIX_LM_DENOISERS = check_denoisers(constants.PREFIX_LM_DENOISERS, "prefix_lm")
WINDOW_INPUT_LENGTH = 64  # --input_length of the UL2 and prefix-LM examples
LOSS_TOLERANCE = 1e-5


@functools.cache
def tokenizer():
    """The real T5 tokenizer with UL2's paradigm tokens (as the entry script adds them)."""
    loaded = building.load_tokenizer(str(require("t5_spiece")))
    building.add_mode_tokens(loaded, ul2.mode_tokens(UL2_DENOISERS))
    return loaded


def tiny_t5(attention):
    """A random 2-layer T5 v1.1 shape (gated-GELU, untied head) over the real vocabulary, fp32, no dropout."""
    tok = tokenizer()
    architecture = dict(d_model=32, d_ff=64, d_kv=8, num_layers=2, num_heads=4, feed_forward_proj="gated-gelu",
                        tie_word_embeddings=False)
    torch.manual_seed(0)
    model = building.new_t5_model(building.t5_config(architecture, building.padded_vocab_size(tok),
                                                     tok.pad_token_id, tok.eos_token_id))
    model.set_attn_implementation(attention)
    return model


# ------------------------------------------------------------------------------------------------ real examples
@functools.cache
def corpus_windows(tokens_length, count):
    """`count` windows of `tokens_length` ids of WikiText-2 text, cut as pre-training cuts its corpus."""
    lines = [line for line in require("wikitext-2-raw/wiki.test.raw").read_text().splitlines() if line.strip()]
    ids = list(itertools.chain.from_iterable(tokenizer()(lines[:400], add_special_tokens=False).input_ids))
    return [ids[i * tokens_length:(i + 1) * tokens_length] for i in range(count)]


def collated_examples(denoisers, paradigms, per_paradigm):
    """(input ids, target ids) of the UL2 collator's rows, `per_paradigm` rows of each paradigm, padding cut off."""
    collator = ul2.DataCollatorForUL2(tokenizer(), denoisers, input_length=WINDOW_INPUT_LENGTH, seed=0,
                                      return_tensors="np")
    windows = corpus_windows(collator.tokens_length, 48)
    batch = collator([{"input_ids": window} for window in windows])
    chosen = [denoisers[i]["paradigm"] for i in collator.denoiser_indices(np.asarray(windows))]
    examples = []
    for paradigm in paradigms:
        rows = [row for row, got in enumerate(chosen) if got == paradigm][:per_paradigm]
        assert len(rows) == per_paradigm, f"48 windows drew fewer than {per_paradigm} {paradigm} rows"
        examples += [(batch["input_ids"][row][batch["attention_mask"][row] == 1].tolist(),
                      batch["labels"][row][batch["labels"][row] != -100].tolist()) for row in rows]
    return examples


def glue_rows(task, count):
    vals = task_format.get_task_vals("glue", task)
    path = require(f"glue/{vals['data_dir_name']}/train.tsv")
    with open(path, newline="", encoding="utf-8-sig") as handle:
        raw = itertools.islice(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE), count)
        rows = [task_format.convert_file_row(vals, row) for row in raw]
    return [(task_format.format_input(vals, row), task_format.format_target(vals, row)) for row in rows]


def glue_mixture_examples(count=4, max_source_length=96, max_target_length=8):
    """SST-2 and RTE training rows in turn, formatted and tokenised (and truncated) as fine-tuning does."""
    pairs = [pair for both in zip(glue_rows("sst2", count), glue_rows("rte", count)) for pair in both]
    eos = tokenizer().eos_token_id
    inputs, _ = truncate(tokenizer()([i for i, _ in pairs]).input_ids, max_source_length, eos)
    targets, _ = truncate(tokenizer()([t for _, t in pairs]).input_ids, max_target_length, eos)
    return list(zip(inputs, targets))


EXAMPLE_SETS = {  # name: (examples, packed input length, packed target length)
    "ul2_r_x_s": (lambda: collated_examples(UL2_DENOISERS, "RXS", 2), 128, 96),
    "prefix_lm": (lambda: collated_examples(PREFIX_LM_DENOISERS, "S", 5), 128, 128),
    "glue_sst2_rte": (glue_mixture_examples, 192, 12),
}


# ---------------------------------------------------------------------------- the contract's batches, built here
def pack(examples, input_length, target_length):
    """A packed batch as the contract states it (rows filled greedily with whole examples, in order), and where
    each example landed: [(row, input start, target start)]."""
    rows, current, used = [], [], (0, 0)
    for example in examples:
        if current and (used[0] + len(example[0]) > input_length or used[1] + len(example[1]) > target_length):
            rows.append(current)
            current, used = [], (0, 0)
        current.append(example)
        used = (used[0] + len(example[0]), used[1] + len(example[1]))
    rows.append(current)
    pad, start = tokenizer().pad_token_id, tokenizer().pad_token_id  # T5 starts decoding from the pad id
    shape_in, shape_out = (len(rows), input_length), (len(rows), target_length)
    batch = {"input_ids": np.full(shape_in, pad), "attention_mask": np.zeros(shape_in),
             "labels": np.full(shape_out, -100), "decoder_input_ids": np.full(shape_out, pad),
             "encoder_segment_ids": np.zeros(shape_in), "decoder_segment_ids": np.zeros(shape_out),
             "encoder_positions": np.zeros(shape_in), "decoder_positions": np.zeros(shape_out)}
    placed = []
    for r, row in enumerate(rows):
        at_in = at_out = 0
        for segment, (inputs, targets) in enumerate(row, start=1):
            enc, dec = slice(at_in, at_in + len(inputs)), slice(at_out, at_out + len(targets))
            batch["input_ids"][r, enc], batch["attention_mask"][r, enc] = inputs, 1
            batch["encoder_segment_ids"][r, enc], batch["encoder_positions"][r, enc] = segment, np.arange(len(inputs))
            batch["labels"][r, dec], batch["decoder_input_ids"][r, dec] = targets, [start, *targets[:-1]]
            batch["decoder_segment_ids"][r, dec], batch["decoder_positions"][r, dec] = segment, np.arange(len(targets))
            placed.append((r, at_in, at_out))
            at_in, at_out = at_in + len(inputs), at_out + len(targets)
    return {key: torch.as_tensor(value, dtype=torch.int64) for key, value in batch.items()}, placed


def unpacked(examples):
    """The same examples one per row, padded to the longest (as the collators pad)."""
    pad = tokenizer().pad_token_id
    longest_in, longest_out = max(len(e[0]) for e in examples), max(len(e[1]) for e in examples)
    rows = {"input_ids": [], "attention_mask": [], "labels": [], "decoder_input_ids": []}
    for inputs, targets in examples:
        rows["input_ids"].append(inputs + [pad] * (longest_in - len(inputs)))
        rows["attention_mask"].append([1] * len(inputs) + [0] * (longest_in - len(inputs)))
        rows["labels"].append(targets + [-100] * (longest_out - len(targets)))
        rows["decoder_input_ids"].append([pad, *targets[:-1]] + [pad] * (longest_out - len(targets)))
    return {key: torch.tensor(value) for key, value in rows.items()}


def token_losses(model, batch):
    """(loss, (B, targets) per-token cross-entropy) of a forward pass."""
    output = model(**batch)
    return output.loss, F.cross_entropy(output.logits.transpose(1, 2), batch["labels"].clamp(min=0),
                                        reduction="none")


def gradients(model, batch):
    model.zero_grad()
    model(**batch).loss.backward()
    return {name: parameter.grad.clone() for name, parameter in model.named_parameters()}


class OneThreadTestCase(parameterized.TestCase):
    """One torch thread: two on a shared 2-core machine run these small models several times slower."""

    def setUp(self):
        super().setUp()
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        self.addCleanup(torch.set_num_threads, threads)


class PackedEqualsUnpackedTest(OneThreadTestCase):

    @parameterized.named_parameters((f"{examples}_{attention}", examples, attention)
                                    for examples in EXAMPLE_SETS for attention in ATTENTIONS)
    def test_token_losses_and_gradients_equal_the_unpacked_examples(self, examples, attention):
        make, input_length, target_length = EXAMPLE_SETS[examples]
        examples = make()
        model = packed_attention.install(tiny_t5(attention))
        packed, placed = pack(examples, input_length, target_length)
        self.assertLess(len(packed["input_ids"]), len(examples))  # rows do hold several examples
        plain = unpacked(examples)
        packed_loss, packed_tokens = token_losses(model, packed)
        plain_loss, plain_tokens = token_losses(model, plain)
        for index, ((row, _, at), (_, targets)) in enumerate(zip(placed, examples)):
            torch.testing.assert_close(packed_tokens[row, at:at + len(targets)], plain_tokens[index, :len(targets)],
                                       rtol=0, atol=LOSS_TOLERANCE, msg=lambda m: f"example {index}: {m}")
        # The loss is the mean over the batch's real target tokens, packed or not.
        torch.testing.assert_close(packed_loss, plain_loss, rtol=0, atol=LOSS_TOLERANCE)
        packed_grads, plain_grads = gradients(model, packed), gradients(model, plain)
        for name, grad in plain_grads.items():
            self.assertGreater(grad.abs().max().item(), 0, name)
            torch.testing.assert_close(packed_grads[name], grad, rtol=1e-4, atol=1e-6, msg=lambda m: f"{name}: {m}")


class FamilyTest(OneThreadTestCase):
    """mT5 and UMT5 (a position bias in every layer) take the same masks: their stacks are T5's."""

    @parameterized.named_parameters(("mt5", "MT5Config"), ("umt5", "UMT5Config"))
    def test_token_losses_equal_the_unpacked_examples(self, config_class):
        tok, examples = tokenizer(), glue_mixture_examples(count=2)
        config = getattr(transformers, config_class)(
            vocab_size=building.padded_vocab_size(tok), d_model=32, d_ff=64, d_kv=8, num_layers=2, num_heads=4,
            dropout_rate=0.0, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
            decoder_start_token_id=tok.pad_token_id)
        torch.manual_seed(0)
        model = packed_attention.install(building.new_t5_model(config))
        packed, placed = pack(examples, 192, 12)
        packed_tokens, plain_tokens = token_losses(model, packed)[1], token_losses(model, unpacked(examples))[1]
        for index, ((row, _, at), (_, targets)) in enumerate(zip(placed, examples)):
            torch.testing.assert_close(packed_tokens[row, at:at + len(targets)], plain_tokens[index, :len(targets)],
                                       rtol=0, atol=LOSS_TOLERANCE)


class FlexBlockMaskTest(OneThreadTestCase):
    """On a GPU t5_flex gives each attention of a packed row whose lengths are whole 128-wide blocks a FlexAttention
    block mask: the encoder's self-attention, and with 128 targets the decoder's causal self-attention and the
    cross-attention (which drops T5's all-zero bias). Its forward runs on CPU too (uncompiled; FlexAttention has no
    CPU backward), where it must give sdpa's token losses."""

    @parameterized.named_parameters(("encoder_only_with_96_targets", 96), ("all_three_with_128_targets", 128))
    @pytest.mark.slow  # a forward of 128 targets through all three masks
    def test_block_mask_forward_matches_sdpa(self, target_length):
        examples = collated_examples(UL2_DENOISERS, "RXS", 2)
        packed, _ = pack(examples, 128, target_length)  # 128 inputs: whole flex blocks
        expected = token_losses(packed_attention.install(tiny_t5("sdpa")).eval(), packed)[1]
        model = packed_attention.install(tiny_t5(t5_flex_attention.NAME)).eval()
        calls = []  # (block mask shape, whether a bias was added), in call order
        real_flex, real_takes = t5_flex_attention.flex_biased_attention, t5_flex_attention.takes_block_mask

        def recording_flex(query, key, value, bias, *args, block_mask=None, **kwargs):
            calls.append((block_mask.shape, bias is not None))
            return real_flex(query, key, value, bias, *args, block_mask=block_mask, attention=flex_attention,
                             **kwargs)

        def as_on_a_gpu(stack, q_length, kv_length, device):
            return real_takes(stack, q_length, kv_length, torch.device("cuda"))

        with torch.no_grad(), mock.patch.object(t5_flex_attention, "takes_block_mask", as_on_a_gpu), \
                mock.patch.object(t5_flex_attention, "flex_biased_attention", recording_flex):
            got = token_losses(model, packed)[1]
        whole = (len(packed["input_ids"]), 1, 128, 128)
        encoder = [(whole, True)] * 2  # the encoder's self-attention in each of 2 layers, biased
        # 128 targets: each decoder layer's causal self-attention (biased), then its cross-attention (no bias)
        decoder = [(whole, True), (whole, False)] * 2 if target_length % 128 == 0 else []
        self.assertEqual(calls, encoder + decoder)
        scored = packed["labels"] != -100
        torch.testing.assert_close(got[scored], expected[scored], rtol=0, atol=LOSS_TOLERANCE)


class UnpackedUnchangedTest(OneThreadTestCase):

    @parameterized.named_parameters(NAMED_ATTENTIONS)
    def test_an_unpacked_batch_runs_bit_for_bit_as_without_the_hooks(self, attention):
        plain = tiny_t5(attention)
        hooked = packed_attention.install(copy.deepcopy(plain))
        batch = unpacked(glue_mixture_examples(count=2))
        for key in ("loss", "logits"):
            self.assertTrue(torch.equal(plain(**batch)[key], hooked(**batch)[key]), key)
        hooked_grads = gradients(hooked, batch)
        for name, grad in gradients(plain, batch).items():
            self.assertTrue(torch.equal(hooked_grads[name], grad), name)
        inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"], "max_new_tokens": 6}
        for extra in ({"do_sample": False}, {"num_beams": 3, "do_sample": False}):
            self.assertTrue(torch.equal(plain.generate(**inputs, **extra), hooked.generate(**inputs, **extra)))

    def test_install_is_idempotent(self):
        model = packed_attention.install(packed_attention.install(tiny_t5("sdpa")))
        copied = packed_attention.install(copy.deepcopy(model))
        for stack in (model.encoder, model.decoder, copied.encoder, copied.decoder):
            self.assertLen(stack._forward_pre_hooks, 1)


class SegmentsApartTest(OneThreadTestCase):
    """A direct check of the block masks: changing the second example of a row changes nothing of the first."""

    @parameterized.named_parameters(NAMED_ATTENTIONS)
    def test_the_first_example_does_not_see_the_second(self, attention):
        examples = glue_mixture_examples(count=1)  # one SST-2 row, then one RTE row
        packed, placed = pack(examples, 192, 12)
        self.assertEqual([row for row, _, _ in placed], [0, 0])
        changed = {key: value.clone() for key, value in packed.items()}
        (_, in_2, out_2), vocab = placed[1], 32000
        changed["input_ids"][0, in_2:in_2 + len(examples[1][0])] = torch.randint(3, vocab, (len(examples[1][0]),))
        changed["decoder_input_ids"][0, out_2 + 1:out_2 + len(examples[1][1])] = 5  # keeps its start token
        first = (slice(0, len(examples[0][0])), slice(0, len(examples[0][1])))
        model = packed_attention.install(tiny_t5(attention)).eval()
        with torch.no_grad():
            before, after = model(**packed), model(**changed)
        torch.testing.assert_close(after.encoder_last_hidden_state[0, first[0]],
                                   before.encoder_last_hidden_state[0, first[0]], rtol=0, atol=0)
        torch.testing.assert_close(after.logits[0, first[1]], before.logits[0, first[1]], rtol=0, atol=0)
        second = slice(out_2, out_2 + len(examples[1][1]))
        self.assertFalse(torch.allclose(after.logits[0, second], before.logits[0, second]))
        # Without the hooks the row is one sequence: the first example then does see the second.
        model = tiny_t5(attention).eval()
        with torch.no_grad():
            plain_before = model(**{k: v for k, v in packed.items() if "segment" not in k and "position" not in k})
            plain_after = model(**{k: v for k, v in changed.items() if "segment" not in k and "position" not in k})
        self.assertFalse(torch.allclose(plain_after.logits[0, first[1]], plain_before.logits[0, first[1]]))


class RefusalsTest(OneThreadTestCase):

    def test_an_attention_that_cannot_keep_segments_apart_is_refused(self):
        model = tiny_t5("sdpa")
        model.config._attn_implementation = "flash_attention_2"
        with self.assertRaisesRegex(UsageError, "--attn_implementation flash_attention_2 cannot keep packed"):
            packed_attention.check_packable(model)

    def test_longt5_is_refused(self):
        """LongT5's local and transient-global encoder attention build their own blocked masks from a 2-D one."""
        config = types.SimpleNamespace(model_type="longt5", _attn_implementation="eager")
        with self.assertRaisesRegex(UsageError, "packed batches need a T5, mT5 or UMT5 model, not longt5"):
            packed_attention.check_packable(types.SimpleNamespace(config=config))

    def test_a_batch_with_one_of_the_two_segment_tensors_is_refused(self):
        model = packed_attention.install(tiny_t5("sdpa"))
        packed, _ = pack(glue_mixture_examples(count=1), 192, 12)
        del packed["decoder_segment_ids"]
        with self.assertRaisesRegex(ValueError, "lacks decoder_segment_ids"):
            model(**packed)


# ------------------------------------------------------------------------ bands (model/banded_attention.py)
def banded_ul2_rows():
    """Real UL2 R, X and S examples of 64-id windows, packed into rows of 256 x 192: several a row."""
    batch, placed = pack(collated_examples(UL2_DENOISERS, "RXS", 4), 256, 192)
    assert max(row for row, _, _ in placed) < len(placed) // 2, "rows should hold several examples"
    return batch


@pytest.mark.slow  # token losses and gradients of four model variants
class BandedEqualsDenseTest(OneThreadTestCase):

    @parameterized.named_parameters(("sdpa", "sdpa", False), (t5_flex_attention.NAME, t5_flex_attention.NAME, False),
                                    ("sdpa_gradient_checkpointing", "sdpa", True))
    def test_token_losses_and_gradients_equal_the_dense_masks(self, attention, checkpointing):
        batch = banded_ul2_rows()
        banded = packed_attention.install(tiny_t5(attention))
        if checkpointing:
            banded.gradient_checkpointing_enable()
            banded.config.use_cache = False
        dense = copy.deepcopy(banded)
        with mock.patch.object(banded_attention, "banded_attention", wraps=banded_attention.banded_attention) as spy:
            banded_loss, banded_tokens = token_losses(banded, batch)
            banded_grads = gradients(banded, batch)
        shapes = {(call.args[0].shape[2], call.args[1].shape[2]) for call in spy.call_args_list}  # queries, keys
        self.assertEqual(shapes, {(256, 256), (192, 192), (192, 256)})  # encoder, decoder self, cross: all banded
        with mock.patch.object(banded_attention, "BAND_SHARE", 0.0):  # no bands: the dense masks
            dense_loss, dense_tokens = token_losses(dense, batch)
            dense_grads = gradients(dense, batch)
        real = batch["labels"] != -100
        torch.testing.assert_close(banded_tokens[real], dense_tokens[real], rtol=0, atol=LOSS_TOLERANCE)
        torch.testing.assert_close(banded_loss, dense_loss, rtol=0, atol=LOSS_TOLERANCE)
        for name, grad in dense_grads.items():
            self.assertGreater(grad.abs().max().item(), 0, name)
            torch.testing.assert_close(banded_grads[name], grad, rtol=1e-4, atol=1e-6, msg=lambda m: f"{name}: {m}")


if __name__ == "__main__":
    absltest.main()
