"""Word vectors counted from the pre-training corpus, as the starting point of a T5's embeddings.

Why: on 2 CPU cores a T5 learns word frequencies long before word meaning, and its embeddings after 15 minutes of
span corruption carry less of SST-2 than random vectors do; co-occurrence counts of the same text carry it in
seconds (docs/quality.md). PPMI + truncated SVD (Levy, Goldberg & Dagan 2015): co-occurrence within a window,
weighted 1/distance, positive PMI with the context distribution smoothed to the power 0.75, rows of U * sqrt(S).
"""
import numpy as np
import scipy.sparse as sparse
import torch

CONTEXT_SMOOTHING = 0.75
WINDOW = 5


def cooccurrence(ids, vocab_size, window=WINDOW) -> sparse.csr_matrix:
    """Symmetric counts of id pairs at distance 1..window in the sequence `ids`, each pair weighted 1/distance."""
    ids = np.asarray(ids, dtype=np.int64)
    counts = sparse.csr_matrix((vocab_size, vocab_size))
    for distance in range(1, min(window, len(ids) - 1) + 1):
        pairs = sparse.coo_matrix((np.full(len(ids) - distance, 1.0 / distance), (ids[:-distance], ids[distance:])),
                                  shape=(vocab_size, vocab_size)).tocsr()
        counts = counts + pairs + pairs.T
    return counts


def ppmi_vectors(counts, dim) -> np.ndarray:
    """(vocab, dim) word vectors from the truncated SVD of the positive PMI matrix; ids never counted get zeros."""
    counts = counts.tocoo()
    total = counts.sum()
    word = np.asarray(counts.sum(axis=1)).ravel() / total
    context = np.asarray(counts.sum(axis=0)).ravel() ** CONTEXT_SMOOTHING
    context /= context.sum()
    pmi = np.log(counts.data / total / (word[counts.row] * context[counts.col]))
    keep = pmi > 0
    positive = sparse.csr_matrix((pmi[keep], (counts.row[keep], counts.col[keep])), shape=counts.shape)
    from sklearn.utils.extmath import randomized_svd  # here: sklearn costs every script ~1 s to import

    left, singular, _ = randomized_svd(positive, dim, random_state=0)  # fixed: every process gets the same vectors
    return left * np.sqrt(singular) * (word > 0)[:, None]  # exact zeros, not SVD round-off, for ids never seen


def set_embeddings(model, vectors):
    """The model's input embeddings take the vectors' directions at their own mean row norm (the scale T5's init
    and optimizer settings expect); ids without a vector (padding rows of the vocabulary) keep their rows."""
    with torch.no_grad():
        embeddings = model.get_input_embeddings().weight
        rows = torch.as_tensor(vectors, dtype=embeddings.dtype, device=embeddings.device)
        seen = rows.norm(dim=1) > 0
        scale = embeddings.norm(dim=1).mean()
        embeddings[:len(rows)][seen] = rows[seen] / rows[seen].norm(dim=1, keepdim=True) * scale
    return int(seen.sum())


def init_embeddings_from_windows(model, windows, window=WINDOW) -> int:
    """Counts the training windows (an iterable of id arrays, read in order) and sets the model's embeddings to
    their word vectors; returns how many embedding rows were set."""
    ids = np.concatenate([np.asarray(w, dtype=np.int64) for w in windows])
    vocab_size = model.get_input_embeddings().weight.shape[0]
    return set_embeddings(model, ppmi_vectors(cooccurrence(ids, vocab_size, window), model.config.d_model))
