"""Batch inference: inputs tokenised once, sorted by length, cut into batches padded to their own longest row
(dynamic padding), generated (greedy or beams) or scored by label words, and put back in input order; the
trainer also scores each row's own options (score_row_options: FLAN's COPA and ReCoRD).

    ids, truncated = inference.tokenize_inputs(tokenizer, texts, max_source_length)
    texts = inference.predict(model, tokenizer, ids, batch_size=32, max_new_tokens=8)         # generation
    words = inference.predict(model, tokenizer, ids, batch_size=32, label_words=["yes", "no"])   # rank scoring

Why sorted: a batch in file order pads every row to the batch's longest, so the encoder and the cross-attention of
every decoding step work on padding (GLUE dev sets: about half of the tokens); sorted batches hold rows of nearly
equal length (bench/predict.py measures the difference). The longest batch goes first, so an out-of-memory error
shows at once. Predictions run in the model's own dtype: place_model casts it to bf16 where asked (predict_arguments:
on by default where the hardware computes bf16).
"""
import numpy as np
import torch
from tqdm.auto import tqdm
from transformers.modeling_outputs import BaseModelOutput

from t5kit.model import precision

LABEL_PAD = -100  # a padded target position (transformers' ignore index), masked out of the scores
DECODER_START_TOKENS = 1  # T5 starts decoding from one pad token, which generate's max_length counts


def tokenize_inputs(tokenizer, texts, max_source_length):
    """(input id lists, how many were cut): each cut to max_source_length keeping EOS last, as training does."""
    ids = tokenizer(list(texts), verbose=False).input_ids
    cut = sum(len(row) > max_source_length for row in ids)
    eos = tokenizer.eos_token_id
    return [row if len(row) <= max_source_length else row[:max_source_length - 1] + [eos] for row in ids], cut


def length_sorted_batches(lengths, batch_size) -> list:
    """Lists of example indices, longest examples first; equal lengths keep input order (a stable sort)."""
    order = sorted(range(len(lengths)), key=lambda index: -lengths[index])
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]


def pad_batch(rows, pad_id, device):
    """input_ids, attention_mask: (B, longest row of this batch), padded on the right with pad_id."""
    longest = max(len(row) for row in rows)
    input_ids = torch.full((len(rows), longest), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), longest), dtype=torch.long)
    for i, row in enumerate(rows):
        input_ids[i, :len(row)] = torch.tensor(row, dtype=torch.long)
        attention_mask[i, :len(row)] = 1
    return input_ids.to(device), attention_mask.to(device)


def place_model(model, device, bf16=False, fp16=False):
    """The model on `device`, its weights cast to bf16 or fp16 where asked (fp16: precision.cast_to_fp16_weights,
    the feed-forward outputs kept and computed in fp32). Weights in bf16 rather than bf16 autocast: autocast
    keeps the fp32 weights and T5's fp32 residual stream, and casts the activations (and once a batch the weights)
    for every matmul, at every decoding step. On a CPU with AMX (2 cores, t5-small, 2026-11-26, bench/predict.py)
    bf16 weights predicted 1.53x as many examples a second as autocast over the seven GLUE dev sets and 1.63x on
    64-token translation, with the same predictions (docs/inference.md). bf16 keeps fp32's exponent range, so T5's
    activations do not overflow as they can in fp16."""
    if fp16:
        return precision.cast_to_fp16_weights(model.to(device))
    return model.to(device=device, dtype=torch.bfloat16 if bf16 else None)


def decode_texts(tokenizer, ids, keep_sentinels=False) -> list:
    """Generated ids -> text: special tokens dropped, or (span filling) only pad and EOS dropped, so the sentinels
    that mark each span stay."""
    if not keep_sentinels:
        return tokenizer.batch_decode(ids, skip_special_tokens=True)
    dropped = {tokenizer.pad_token_id, tokenizer.eos_token_id}
    return [tokenizer.decode([token for token in row.tolist() if token not in dropped], skip_special_tokens=False)
            for row in ids]


def predict(model, tokenizer, input_ids, batch_size, label_words=None, max_new_tokens=None, num_beams=1,
            keep_sentinels=False, progress=True, **generate_kwargs) -> list:
    """One prediction per row of input_ids (lists of ids), in input order: the likeliest of label_words when given
    (score_label_words), else the decoded generation of at most max_new_tokens tokens."""
    device = next(model.parameters()).device
    # max_length, not max_new_tokens: the generation config a fine-tuned model saves sets max_length, and giving
    # both makes transformers warn on every call.
    if label_words is None:
        generate_kwargs.update(max_length=DECODER_START_TOKENS + max_new_tokens, num_beams=num_beams)
    predictions = [None] * len(input_ids)
    model.eval()
    with torch.inference_mode(), tqdm(total=len(input_ids), unit="example", disable=not progress) as bar:
        for batch in length_sorted_batches([len(row) for row in input_ids], batch_size):
            ids, mask = pad_batch([input_ids[i] for i in batch], tokenizer.pad_token_id, device)  # (B, L)
            if label_words is not None:
                scores = score_label_words(model, tokenizer, ids, mask, label_words)  # (B, n_labels)
                texts = rank_label_words(scores.float().cpu(), label_words)
            else:
                texts = decode_texts(tokenizer, model.generate(input_ids=ids, attention_mask=mask, **generate_kwargs),
                                     keep_sentinels)
            for index, text in zip(batch, texts):
                predictions[index] = text
            bar.update(len(batch))
    return predictions


def score_label_words(model, tokenizer, input_ids, attention_mask, label_words):
    """(B, n_labels) sum of log-probabilities of each label word's target ids (EOS included, as the targets are
    tokenized in training) given each input, as T5's rank classification scores. Encodes the inputs once; call
    with the model in eval mode. input_ids, attention_mask: (B, input_length)."""
    with torch.no_grad():
        encoder_outputs = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask)
        scores = []
        for target_ids in tokenizer(list(label_words)).input_ids:
            labels = torch.tensor(target_ids, device=input_ids.device).repeat(input_ids.shape[0], 1)  # (B, T)
            scores.append(target_log_likelihoods(model, encoder_outputs, attention_mask, labels))  # (B,)
        return torch.stack(scores, dim=-1)  # (B, n_labels)


def score_row_options(model, tokenizer, input_ids, attention_mask, options):
    """(B, K) log-likelihoods of each row's own options (options[i]: row i's texts; K: the most any row has, at
    least 1), summed as score_label_words sums them (EOS included); -inf where a row has no K-th option. FLAN's
    COPA and ReCoRD rank these (rank_classification_from_options). The encoder runs once; the (row, option) pairs
    are decoded in groups of B, each option's ids padded to its group's longest and the padding masked out."""
    pairs = [(row, slot) for row, texts in enumerate(options) for slot in range(len(texts))]
    target_ids = tokenizer([options[row][slot] for row, slot in pairs]).input_ids if pairs else []
    device, size = input_ids.device, input_ids.shape[0]
    scores = torch.full((size, max([1, *map(len, options)])), float("-inf"), device=device)
    with torch.no_grad():
        hidden = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        for start in range(0, len(pairs), size):  # at most B decoded rows a call, as for label words
            rows, slots = (torch.tensor(column, device=device) for column in zip(*pairs[start:start + size]))
            group = target_ids[start:start + size]
            labels = torch.full((len(group), max(map(len, group))), LABEL_PAD, dtype=torch.long)
            for i, ids in enumerate(group):
                labels[i, :len(ids)] = torch.tensor(ids, dtype=torch.long)
            encoded = BaseModelOutput(last_hidden_state=hidden[rows])
            scores[rows, slots] = target_log_likelihoods(model, encoded, attention_mask[rows], labels.to(device))
    return scores


def best_options(scores, counts):
    """(B,) the index of each row's likeliest option in score_row_options' scores (ties: the first, as np.argmax in
    T5's rank_classification metric picks); -1 for a row with no options (counts: (B,) how many each row has)."""
    return torch.where(counts > 0, scores.argmax(dim=-1), -1)


def target_log_likelihoods(model, encoder_outputs, attention_mask, labels):
    """(B,) sum of log-probabilities of each row's target ids given its encoded input; labels: (B, T), LABEL_PAD past
    a row's end. The decoder reads the labels as model(labels=...) feeds them (T5's _shift_right: the start token,
    then the labels, LABEL_PAD as pad); no loss is computed."""
    logits = model(encoder_outputs=encoder_outputs, attention_mask=attention_mask,
                   decoder_input_ids=model._shift_right(labels)).logits
    log_probs = logits.float().log_softmax(dim=-1)  # (B, T, vocab)
    picked = log_probs.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (B, T)
    return torch.where(labels != LABEL_PAD, picked, 0.0).sum(dim=-1)


def rank_label_words(log_likelihoods, label_words) -> list:
    """The label word with the highest log-likelihood per row; ties go to the earlier label word.
    log_likelihoods: (B, n_labels) array or CPU tensor, column j scoring label_words[j]."""
    scores = np.asarray(log_likelihoods)
    if scores.ndim != 2 or scores.shape[1] != len(label_words):
        raise ValueError(f"log_likelihoods must be (B, {len(label_words)}), got shape {scores.shape}")
    return [label_words[index] for index in scores.argmax(axis=-1)]
