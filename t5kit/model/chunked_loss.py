"""--loss_chunk_tokens, one owner: T5's training loss without the full (tokens x vocabulary) logits.

    chunked_loss.install(model, 4096)    # building.build_model, with --loss_chunk_tokens 4096
    model(input_ids=..., labels=...).loss  # in training: the same loss, computed in chunks of 4096 target tokens

T5ForConditionalGeneration's loss (transformers 5.24, modeling_t5.py) projects every decoder output onto the
vocabulary (lm_head; first scaled by d_model**-0.5 where config.scale_decoder_outputs, set from tie_word_embeddings:
T5 1.0 ties, T5 v1.1 does not) and takes CrossEntropyLoss(ignore_index=-100) of all the logits at once: the mean
over the target tokens not labelled -100. The logits are not upcast: under autocast lm_head returns bf16 or fp16
logits and autocast runs the cross-entropy in fp32. At t5-v1_1-base, batch 128 x 114 targets, that is 14,592 x
32,128 logits, held for the backward with their fp32 log-softmax and gradient.

install() gives the model a forward that, when it trains (model.training, gradients on, labels given), runs the
encoder and decoder exactly as transformers' forward does (the keyword arguments it does not know, such as a packed
batch's segment ids, ride along to both stacks: model/packed_attention.py), then chunked_cross_entropy: lm_head and
the summed cross-entropy of each chunk of `chunk_tokens` tokens under torch.utils.checkpoint, so that neither the
forward nor the backward holds more than one chunk's logits (the backward computes a chunk's logits again: one
more lm_head forward a step), each chunk under the caller's autocast as the whole was. The sums over the chunks are
divided by the count of tokens not labelled -100: the mean, equal to transformers' loss up to the order of an fp32
sum (tests/model/test_chunked_loss.py). The output has the loss and no logits. Evaluation, prediction, rank scoring
and generate (model.eval(), or no gradients, or no labels) take transformers' forward, logits and all. What needs
a step's logits is refused with the flag (config/checks.py): --z_loss and --label_smoothing_factor.
"""
import functools
import types

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from transformers.modeling_outputs import Seq2SeqLMOutput

from t5kit.errors import UsageError

IGNORE_INDEX = -100  # T5's CrossEntropyLoss(ignore_index=-100): target padding
# Families whose forward is T5ForConditionalGeneration's (mT5 never scales; UMT5 scales as T5 does).
CHUNKED_MODEL_TYPES = ("t5", "mt5", "umt5")


def install(model, chunk_tokens):
    """The model's training loss in chunks of `chunk_tokens` target tokens (module doc); 0 leaves it as it is.
    Returns the model."""
    if not chunk_tokens:
        return model
    if model.config.model_type not in CHUNKED_MODEL_TYPES:
        raise UsageError(f"--loss_chunk_tokens applies to {', '.join(CHUNKED_MODEL_TYPES)} models, not "
                         f"{model.config.model_type}; use --loss_chunk_tokens 0")
    model.forward = types.MethodType(_forward(type(model).forward, chunk_tokens), model)
    return model


def _forward(standard_forward, chunk_tokens):
    @functools.wraps(standard_forward)  # its signature: Trainer keeps the dataset columns that forward names
    def forward(self, *args, **kwargs):
        if args or not takes_chunked_loss(self, kwargs):
            return standard_forward(self, *args, **kwargs)
        return forward_with_chunked_loss(self, chunk_tokens, **kwargs)
    forward.chunk_tokens = chunk_tokens
    return forward


def takes_chunked_loss(model, kwargs) -> bool:
    """A training step (training mode, gradients on, labels given) that starts from the inputs: the calls whose
    logits nothing reads. Evaluation, rank scoring and generate (no gradients, or eval mode, or an encoder output
    or cache to go on from) need them."""
    if not (model.training and torch.is_grad_enabled() and kwargs.get("labels") is not None):
        return False
    return all(kwargs.get(key) is None for key in ("encoder_outputs", "cache", "past_key_values"))


def chunk_tokens_of(model) -> int:
    """The chunk size install() gave the model, 0 where it did not."""
    return getattr(getattr(model.forward, "__func__", None), "chunk_tokens", 0)


def forward_with_chunked_loss(model, chunk_tokens, labels, input_ids=None, attention_mask=None,
                              decoder_input_ids=None, decoder_attention_mask=None, inputs_embeds=None,
                              decoder_inputs_embeds=None, use_cache=None, **kwargs):
    """transformers' T5ForConditionalGeneration.forward (5.24) for training, its loss through
    chunked_cross_entropy. No cache: nothing decodes on from a training step."""
    encoder_outputs = model.encoder(input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds,
                                    **kwargs)
    if decoder_input_ids is None and decoder_inputs_embeds is None:
        decoder_input_ids = model._shift_right(labels)
    decoder_outputs = model.decoder(input_ids=decoder_input_ids, attention_mask=decoder_attention_mask,
                                    inputs_embeds=decoder_inputs_embeds, encoder_hidden_states=encoder_outputs[0],
                                    encoder_attention_mask=attention_mask, use_cache=False, **kwargs)
    loss = chunked_cross_entropy(decoder_outputs[0], model.lm_head, labels, chunk_tokens,
                                 decoder_output_scale(model.config))
    return Seq2SeqLMOutput(loss=loss, encoder_last_hidden_state=encoder_outputs[0])


def decoder_output_scale(config) -> float:
    """What transformers multiplies the decoder output by before lm_head: d_model**-0.5 where the config says
    scale_decoder_outputs (tied T5 1.0; MT5Config has no such key, and mT5 never scales), else 1."""
    return config.d_model ** -0.5 if getattr(config, "scale_decoder_outputs", False) else 1.0


def chunked_cross_entropy(hidden_states, lm_head, labels, chunk_tokens, scale=1.0):
    """Mean cross-entropy of lm_head(hidden_states * scale) against labels over the tokens not labelled -100, one
    checkpointed chunk of `chunk_tokens` tokens at a time. hidden_states (..., d_model), labels (...). All tokens
    labelled -100: NaN, as CrossEntropyLoss gives."""
    if scale != 1.0:
        hidden_states = hidden_states * scale
    hidden_states = hidden_states.reshape(-1, hidden_states.shape[-1])
    labels = labels.reshape(-1).to(hidden_states.device)
    total = hidden_states.new_zeros((), dtype=torch.float32)
    for start in range(0, labels.numel(), chunk_tokens):
        chunk = slice(start, start + chunk_tokens)
        total = total + checkpoint(_summed_cross_entropy, lm_head, hidden_states[chunk], labels[chunk],
                                   use_reentrant=False)
    return total / (labels != IGNORE_INDEX).sum()


def _summed_cross_entropy(lm_head, hidden_states, labels):
    logits = lm_head(hidden_states)  # under the caller's autocast, as transformers' forward computes them
    return F.cross_entropy(logits, labels, ignore_index=IGNORE_INDEX, reduction="sum").float()
