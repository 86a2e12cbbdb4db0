"""What makes a tokenizer a T5 one: pad and EOS, and the 100 sentinels <extra_id_0..99> as single tokens, which span
corruption writes into its inputs and targets. Free of torch, so that train_tokenizer.py checks what it built without
loading a model library."""
import constants
from t5kit.errors import UsageError


def check_t5_tokenizer(tokenizer, name):
    """Raises UsageError unless `tokenizer` has pad, eos and <extra_id_0..99> as single tokens; returns their ids."""
    missing = [token for token in ("pad_token", "eos_token") if getattr(tokenizer, f"{token}_id", None) is None]
    if missing:
        raise UsageError(f"tokenizer {name} has no {' or '.join(missing)}; T5 needs both. Use a T5 tokenizer or "
                         "build one with train_tokenizer.py")
    sentinels = [f"<extra_id_{i}>" for i in range(constants.NUM_SENTINELS)]
    encoded = tokenizer(sentinels, add_special_tokens=False)["input_ids"]
    bad = [s for s, ids in zip(sentinels, encoded) if len(ids) != 1 or ids[0] == tokenizer.unk_token_id]
    if bad or len({ids[0] for ids in encoded}) != constants.NUM_SENTINELS:
        first = bad[0] if bad else "duplicate ids"
        raise UsageError(f"tokenizer {name} lacks {len(bad) or 'distinct'} of the {constants.NUM_SENTINELS} "
                         f"sentinel tokens <extra_id_0..{constants.NUM_SENTINELS - 1}> (first: {first}) that span "
                         "corruption needs; use a T5 tokenizer or build one with train_tokenizer.py")
    return [ids[0] for ids in encoded]
