"""Packed rows compute what their examples compute one per row, on the device at hand: for each attention
implementation, the largest difference of a real target token's loss, of the batch loss and of a gradient between
packed rows (t5kit/data/packing.py, model/packed_attention.py) and the same examples unpacked, fp32 (TF32 off).

    python bench/packed_equivalence.py --device cuda      # the GPU check's packed_equivalence section
    python bench/packed_equivalence.py --device cpu --tiny

tests/model/test_packed_attention.py checks the same on CPU, where t5_flex runs SDPA (and FlexAttention's forward);
on a GPU t5_flex runs each attention of packed rows through FlexAttention with a block mask of the segments (rows of
256 inputs and 128 targets, multiples of its 128-wide blocks: the encoder's self-attention, the decoder's and the
cross-attention), whose backward only this script exercises. Random examples over T5's vocabulary size, a random
model: the maths, not the text, is under test. The last line printed is the JSON of the figures.
"""
import argparse
import json

import torch
import torch.nn.functional as F
from transformers import T5Config, T5ForConditionalGeneration

from t5kit.data import packing
from t5kit.model import packed_attention, t5_flex_attention

ATTENTIONS = ("eager", "sdpa", t5_flex_attention.NAME)
VOCAB_SIZE = 32128  # T5's
ROW_SHAPE = (256, 128)  # two FlexAttention blocks of inputs, one of targets (the first GPU run: 96 targets)


def random_examples(count, generator):
    """[(input ids, target ids), ...]: 8-100 inputs and 2-30 targets each, EOS (1) last, no padding id (0)."""
    examples = []
    for _ in range(count):
        inputs = torch.randint(2, VOCAB_SIZE, (int(torch.randint(8, 101, (1,), generator=generator)),),
                               generator=generator)
        targets = torch.randint(2, VOCAB_SIZE, (int(torch.randint(2, 31, (1,), generator=generator)),),
                                generator=generator)
        inputs[-1] = targets[-1] = 1
        examples.append((inputs.tolist(), targets.tolist()))
    return examples


def batches(examples):
    """(packed batch, unpacked batch, [(row, first target slot)] per example): the packed rows as the collators
    build them, and the examples one per row padded to the longest."""
    lengths = [len(i) for i, _ in examples], [len(t) for _, t in examples]
    rows = packing.next_fit_rows(*lengths, ROW_SHAPE)
    packed = packing.pack_rows(examples, rows, int(rows[-1]) + 1, ROW_SHAPE, 0, 0)
    starts, used = [], {}
    for row, targets in zip(rows.tolist(), lengths[1]):
        starts.append((row, used.get(row, 0)))
        used[row] = used.get(row, 0) + targets
    longest_in, longest_out = max(lengths[0]), max(lengths[1])
    plain = {"input_ids": [i + [0] * (longest_in - len(i)) for i, _ in examples],
             "attention_mask": [[1] * len(i) + [0] * (longest_in - len(i)) for i, _ in examples],
             "labels": [t + [-100] * (longest_out - len(t)) for _, t in examples],
             "decoder_input_ids": [[0, *t[:-1]] + [0] * (longest_out - len(t)) for _, t in examples]}
    def to_tensors(batch):
        return {key: torch.as_tensor(value, dtype=torch.int64) for key, value in batch.items()}
    return to_tensors(packed), to_tensors(plain), starts


def forward_backward(model, batch, device):
    """(loss, (B, targets) per-token losses, {name: gradient}) of one pass."""
    model.zero_grad()
    output = model(**{key: value.to(device) for key, value in batch.items()})
    output.loss.backward()
    tokens = F.cross_entropy(output.logits.transpose(1, 2), batch["labels"].to(device).clamp(min=0),
                             reduction="none")
    return output.loss.item(), tokens.detach().cpu(), {n: p.grad.detach().cpu() for n, p in model.named_parameters()}


def compare(attention, config, examples, device):
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(config)
    model.set_attn_implementation(attention)
    model = packed_attention.install(model.to(device))
    packed, plain, starts = batches(examples)
    packed_loss, packed_tokens, packed_grads = forward_backward(model, packed, device)
    plain_loss, plain_tokens, plain_grads = forward_backward(model, plain, device)
    token_gap = max((packed_tokens[row, at:at + len(targets)] - plain_tokens[index, :len(targets)]).abs().max().item()
                    for index, ((row, at), (_, targets)) in enumerate(zip(starts, examples)))
    grad_gap = max(((packed_grads[name] - grad).abs().max() / grad.abs().max().clamp(min=1e-12)).item()
                   for name, grad in plain_grads.items())
    return {"rows": len(packed["input_ids"]), "examples": len(examples), "max_token_loss_diff": token_gap,
            "loss_diff": abs(packed_loss - plain_loss), "max_relative_grad_diff": grad_gap}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=("cpu", "cuda"))
    parser.add_argument("--tiny", action="store_true", help="a 2-layer d_model 32 model and 12 examples (the CPU "
                        "dry run); default: t5-small's shape (6 layers, d_model 512) and 48 examples")
    args = parser.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # fp32 as on a CPU
    shape = (dict(d_model=32, d_ff=64, d_kv=8, num_layers=2, num_heads=4) if args.tiny
             else dict(d_model=512, d_ff=2048, d_kv=64, num_layers=6, num_heads=8))
    config = T5Config(vocab_size=VOCAB_SIZE, dropout_rate=0.0, feed_forward_proj="gated-gelu",
                      tie_word_embeddings=False, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, **shape)
    examples = random_examples(12 if args.tiny else 48, torch.Generator().manual_seed(0))
    figures = {"device": args.device, "row_shape": list(ROW_SHAPE),
               "attentions": {name: compare(name, config, examples, args.device) for name in ATTENTIONS}}
    for name, result in figures["attentions"].items():
        print(f"{name}: {result['examples']} examples in {result['rows']} rows; per-token loss within "
              f"{result['max_token_loss_diff']:.1e}, loss {result['loss_diff']:.1e}, gradients "
              f"{result['max_relative_grad_diff']:.1e} of their largest entry")
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
