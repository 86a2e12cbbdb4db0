"""Named constants: T5 span-corruption defaults, model size presets and the fine-tuning task registry.

Numbers here come from the T5 paper (Raffel et al., 2020, "Exploring the Limits of Transfer Learning with a
Unified Text-to-Text Transformer") and google-research/text-to-text-transfer-transformer (t5/models/gin/
models/*.gin, t5/data/preprocessors.py); T5 v1.1 shapes from its released_checkpoints.md.
"""

# Span corruption (T5 paper, section 3.3.4: 15 % of tokens corrupted, mean span length 3).
NOISE_DENSITY = 0.15
MEAN_NOISE_SPAN_LENGTH = 3.0
NUM_SENTINELS = 100  # <extra_id_0> .. <extra_id_99>, as in every released T5 vocabulary.
INPUT_LENGTH = 512  # encoder length after corruption used to pre-train the released T5 models.

# T5 special-token layout of the SentencePiece vocabulary (t5/data/vocabularies.py).
PAD_ID = 0
EOS_ID = 1
UNK_ID = 2

# Pad the embedding matrix to a multiple of this (32100 tokens -> 32128 in the released checkpoints), so
# matmuls over the vocabulary stay tensor-core aligned.
VOCAB_PAD_MULTIPLE = 128

# Architecture presets for random initialisation (`--model_size`). Keys are T5Config arguments.
_T5_V1_0 = dict(feed_forward_proj="relu", tie_word_embeddings=True)
_T5_V1_1 = dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False)
MODEL_SIZE_PRESETS = {
    # Tiny shapes: "t5-tiny" for unit tests (seconds on CPU), "t5-mini" for the offline quickstart.
    "t5-tiny": dict(d_model=32, d_ff=64, d_kv=16, num_layers=2, num_heads=2, **_T5_V1_0),
    "t5-mini": dict(d_model=128, d_ff=512, d_kv=32, num_layers=2, num_heads=4, **_T5_V1_0),
    "t5-small": dict(d_model=512, d_ff=2048, d_kv=64, num_layers=6, num_heads=8, **_T5_V1_0),
    "t5-base": dict(d_model=768, d_ff=3072, d_kv=64, num_layers=12, num_heads=12, **_T5_V1_0),
    "t5-large": dict(d_model=1024, d_ff=4096, d_kv=64, num_layers=24, num_heads=16, **_T5_V1_0),
    "t5-v1_1-small": dict(d_model=512, d_ff=1024, d_kv=64, num_layers=8, num_heads=6, **_T5_V1_1),
    "t5-v1_1-base": dict(d_model=768, d_ff=2048, d_kv=64, num_layers=12, num_heads=12, **_T5_V1_1),
    "t5-v1_1-large": dict(d_model=1024, d_ff=2816, d_kv=64, num_layers=24, num_heads=16, **_T5_V1_1),
}
