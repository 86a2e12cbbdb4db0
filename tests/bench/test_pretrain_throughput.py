"""bench/pretrain_throughput.py's --loss_chunk_tokens and --fused_rmsnorm reach the model both arms build (the GPU
check's ..._loss_chunks and ..._fused_rmsnorm sections time them against the arm without them)."""
from absl.testing import absltest, parameterized

from bench import pretrain_throughput
from t5kit.model import chunked_loss, fused_rmsnorm


class Tokenizer:  # what build_t5_config reads
    pad_token_id, eos_token_id = 0, 1

    def __len__(self):
        return 128


class ModelOptionsTest(parameterized.TestCase):

    @parameterized.named_parameters(("off", [], 0, False),
                                    ("on", ["--loss_chunk_tokens", "64", "--fused_rmsnorm"], 64, True))
    def test_both_arms_model_takes_the_flags(self, flags, chunk_tokens, fused):
        args = pretrain_throughput.parse_args(["--model_size", "t5-tiny", *flags])
        training_args = pretrain_throughput.make_training_args(args, self.create_tempdir().full_path, "fp32")
        model = pretrain_throughput.build_model(args, Tokenizer(), training_args)
        self.assertEqual(chunked_loss.chunk_tokens_of(model), chunk_tokens)
        self.assertEqual({fused_rmsnorm.is_fused(norm) for norm in fused_rmsnorm.t5_norms(model)}, {fused})
        self.assertContainsSubset(("loss_chunk_tokens", "fused_rmsnorm"), pretrain_throughput.SETTINGS)


if __name__ == "__main__":
    absltest.main()
