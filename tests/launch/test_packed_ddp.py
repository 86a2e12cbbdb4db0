"""Packed batches under DistributedDataParallel (t5kit/model/packed_attention.py): the segment keys ride through
DDP's forward to the stacks' hooks, and the gradients are synchronised: two gloo processes, each with its own packed
row, end with the gradients of one process that averages the two rows' losses."""
import os

import pytest
import torch
from absl.testing import absltest
from transformers import T5Config, T5ForConditionalGeneration

from t5kit.model import packed_attention
from tests.forked import run_ranks

pytestmark = pytest.mark.launch


def tiny_t5():
    torch.manual_seed(0)
    return T5ForConditionalGeneration(T5Config(vocab_size=64, d_model=16, d_ff=32, d_kv=8, num_layers=2, num_heads=2,
                                               dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0))


def packed_row(rank):
    """One row of 12 inputs and 8 targets holding two random examples (different on each rank), as the batch
    contract lays them out."""
    generator = torch.Generator().manual_seed(rank)
    (in_1, in_2), (out_1, out_2) = (5, 4), (3, 4)
    inputs, targets = torch.randint(2, 64, (in_1 + in_2,), generator=generator), \
        torch.randint(2, 64, (out_1 + out_2,), generator=generator)
    row = {"input_ids": torch.zeros(1, 12, dtype=torch.int64), "attention_mask": torch.zeros(1, 12, dtype=torch.int64),
           "labels": torch.full((1, 8), -100), "decoder_input_ids": torch.zeros(1, 8, dtype=torch.int64),
           "encoder_segment_ids": torch.zeros(1, 12, dtype=torch.int64),
           "decoder_segment_ids": torch.zeros(1, 8, dtype=torch.int64)}
    row["input_ids"][0, :in_1 + in_2], row["attention_mask"][0, :in_1 + in_2] = inputs, 1
    row["encoder_segment_ids"][0, :in_1], row["encoder_segment_ids"][0, in_1:in_1 + in_2] = 1, 2
    row["labels"][0, :out_1 + out_2] = targets
    row["decoder_segment_ids"][0, :out_1], row["decoder_segment_ids"][0, out_1:out_1 + out_2] = 1, 2
    row["decoder_input_ids"][0, 1:out_1], row["decoder_input_ids"][0, out_1 + 1:out_1 + out_2] = \
        targets[:out_1 - 1], targets[out_1:out_1 + out_2 - 1]  # each example starts from the start token (0)
    return row


# Each process: its own packed row through DDP; rank 0 saves the synchronised gradients. run_ranks, not mp.spawn: it
# has a time limit (an mp.spawn rendezvous here once hung CI).
CHILD = """
import sys
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from t5kit.model import packed_attention
from tests.launch.test_packed_ddp import packed_row, tiny_t5

dist.init_process_group("gloo")
torch.set_num_threads(1)
rank = dist.get_rank()
model = packed_attention.install(tiny_t5())
wrapped = DistributedDataParallel(model)  # held: its reducer all-reduces the gradients during backward
wrapped(**packed_row(rank)).loss.backward()
if rank == 0:
    torch.save({name: p.grad for name, p in model.named_parameters()}, sys.argv[1])
dist.destroy_process_group()
"""


class PackedDdpTest(absltest.TestCase):

    def test_two_processes_give_the_gradients_of_one_averaging_their_rows(self):
        out = os.path.join(self.create_tempdir().full_path, "grads.pt")
        run_ranks("-c", [CHILD, out], timeout=300)
        synced = torch.load(out)
        model = packed_attention.install(tiny_t5())
        losses = [model(**packed_row(rank)).loss for rank in (0, 1)]
        own = torch.autograd.grad(losses[0], model.shared.weight, retain_graph=True)[0]
        (sum(losses) / 2).backward()
        self.assertFalse(torch.allclose(own, synced["shared.weight"]))  # rank 0 did not keep its own gradient
        for name, parameter in model.named_parameters():
            torch.testing.assert_close(synced[name], parameter.grad, rtol=1e-5, atol=1e-7, msg=name)


if __name__ == "__main__":
    absltest.main()
