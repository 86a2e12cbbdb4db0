"""Mixed precision, one owner: what T5 computes in under bf16 and fp16 autocast, and in fp16 weights.

    precision.prepare_model(model, fp16=True)          # building.build_model: hooks for the run's precision
    precision.protect_fp16(model)                      # predict_t5.py --fp16: the same protection for fp16 weights

- Autocast leaves T5's relative position bias fp32 beside bf16/fp16 queries and keys; SDPA then refuses its fused
  kernels, so the bias is cast to the autocast dtype (every run; nothing changes without autocast).
- --activation_dtype bfloat16 (T5X's bf16 activations): the embeddings' outputs are cast, so the residual stream is
  bf16 from the first layer on (cast_residual_stream_under_autocast).
- --fp16: fp16 stops at 65504, and T5's feed-forward output projection `wo` sums d_ff products whose total leaves
  that range in trained T5 checkpoints (transformers issues 9295, 14189; CTranslate2 fixed it the same way, keeping
  this output in fp32). protect_fp16 runs every feed-forward `wo` in fp32 (its input and weight cast up, autocast
  off), so the value added to the residual stream is finite. By construction, not by clamping: transformers clamps
  an fp16 stream that already holds inf, which hides the overflow. Around it, under autocast, the residual stream
  stays fp32 (the embeddings are fp32 and each residual add of an fp16 output keeps it so), the layer norms compute
  their variance in fp32, and the loss (cross-entropy, z-loss's logsumexp) is computed in fp32; SDPA and
  FlexAttention accumulate the query-key products and the softmax in fp32, while eager attention would
  materialise the logits in fp16 (config/checks.py refuses --fp16 with it). Parameters, gradients and optimizer
  states stay fp32, and the loss is scaled (GradScaler) as HF's Trainer does it. fp32 and bf16 runs take none of
  the fp16 hooks and stay bit for bit as they were.
- The limit: the feed-forward's inner activations (wi, its gate) stay fp16; a model whose inner activations alone
  pass 65504 overflows there (tests/model/test_precision.py shows where the line lies on a tiny model).
"""
import types

import torch
import torch.nn.functional as F

FEED_FORWARD_INPUTS = ("wi", "wi_0")  # T5's ReLU feed-forward, T5 v1.1's (and mT5's, UMT5's) gated one


def prepare_model(model, fp16=False, activation_dtype="float32"):
    """The hooks a training run's precision needs (module doc); returns the model."""
    cast_position_bias_under_autocast(model)
    if activation_dtype == "bfloat16":
        cast_residual_stream_under_autocast(model)
    if fp16:
        protect_fp16(model)
    return model


def feed_forward_outputs(model) -> list:
    """The `wo` Linear of every T5-family feed-forward block (T5DenseActDense, T5DenseGatedActDense and the mT5,
    UMT5 and LongT5 copies): a module holding `wo` beside `wi` or `wi_0`."""
    return [module.wo for module in model.modules()
            if isinstance(getattr(module, "wo", None), torch.nn.Linear)
            and any(hasattr(module, name) for name in FEED_FORWARD_INPUTS)]


def protect_fp16(model) -> int:
    """Every feed-forward `wo` computes in fp32, under autocast or with fp16 weights (its own weight kept fp32 by
    predict's cast). Returns how many were protected; a second call changes nothing."""
    protected = feed_forward_outputs(model)
    for linear in protected:
        linear.forward = types.MethodType(_fp32_linear, linear)
    return len(protected)


def is_protected(linear) -> bool:
    return getattr(linear.forward, "__func__", None) is _fp32_linear


def _fp32_linear(self, hidden_states):
    with torch.autocast(hidden_states.device.type, enabled=False):
        bias = None if self.bias is None else self.bias.float()
        return F.linear(hidden_states.float(), self.weight.float(), bias)


def cast_to_fp16_weights(model):
    """predict_t5.py --fp16: every weight in fp16 but the feed-forward outputs, which stay fp32 and compute in fp32
    (the protection above); returns the model."""
    model.to(torch.float16)
    for linear in feed_forward_outputs(model):
        linear.float()
    protect_fp16(model)
    return model


def cast_position_bias_under_autocast(model):
    """Under bf16/fp16 autocast T5's relative position bias leaves its embedding (an fp32 weight) in fp32, and so
    does the additive attention mask built from it while queries and keys are bf16: SDPA then refuses its fused
    kernels ("invalid dtype for bias") and runs the unfused math path. Casting the bias to the autocast dtype gives
    SDPA one dtype; without autocast (fp32 training) the hook returns the bias unchanged."""
    for module in model.modules():
        if getattr(module, "has_relative_attention_bias", False):  # the T5 family's attention classes
            for bias in ("relative_attention_bias", "global_relative_attention_bias"):  # the second: LongT5 TGlobal
                if isinstance(getattr(module, bias, None), torch.nn.Embedding):
                    getattr(module, bias).register_forward_hook(_output_to_autocast_dtype)


def cast_residual_stream_under_autocast(model):
    """--activation_dtype bfloat16, T5X's bf16 activations with fp32 parameters. Under autocast only the matmuls run
    in bf16: T5's residual stream starts as the fp32 output of its embedding and every residual add of a bf16 layer
    output keeps it fp32, so the adds, dropouts and norms between the matmuls read and write fp32. Casting the
    encoder's and decoder's embedding outputs makes that stream bf16 from the first layer on, as in T5X (its
    `activation_dtype`), halving that traffic; the norms still compute their variance in fp32, the loss stays fp32,
    and parameters, gradients and optimizer states keep their fp32. Without autocast (fp32 runs, predict_t5) the
    hooks return the embeddings unchanged. Returns the number of modules hooked: 1 where both stacks read `shared`
    (share_input_embedding), 2 where each holds its own."""
    stacks = (model.get_encoder(), model.get_decoder())
    modules = {id(stack.embed_tokens): stack.embed_tokens for stack in stacks}.values()
    for module in modules:
        module.register_forward_hook(_output_to_autocast_dtype)
    return len(modules)


def _output_to_autocast_dtype(module, inputs, output):
    device_type = output.device.type
    if torch.is_autocast_enabled(device_type):
        return output.to(torch.get_autocast_dtype(device_type))
    return output
