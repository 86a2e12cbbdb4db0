"""Train a SentencePiece tokenizer offline with T5's layout, saved as a folder `AutoTokenizer` loads.

    python train_tokenizer.py --train_files corpus/train.txt --output_dir tokenizer --vocab_size 8000
    python train_tokenizer.py --train_files a.txt b.txt --output_dir tok --input_sentence_size 2000000
    python train_tokenizer.py --train_files c4_en.txt --output_dir tok32k --overwrite_output_dir

Layout (t5/data/vocabularies.py): <pad>=0, </s>=1, <unk>=2, no BOS, then the SentencePiece pieces, then the 100
sentinels with <extra_id_99> = piece count and <extra_id_0> the highest id (32099 in T5's 32100-token vocabulary).
The folder holds spiece.model (for sentencepiece/seqio), tokenizer.json and tokenizer_config.json.
"""
import logging
import os
import shutil
import sys
import time
from pathlib import Path

import sentencepiece

from constants import NUM_SENTINELS
from t5kit import cli
from t5kit.config import parsing
from t5kit.config.tokenizer_arguments import TOKENIZER_FLAG_CLASSES
from t5kit.model import tokenizer_training
from t5kit.model.tokenizer_check import check_t5_tokenizer
from t5kit.outputs import run_folder
from t5kit.outputs.atomic_files import publish_folder

logger = logging.getLogger(__name__)


def main(argv=None):
    # 1. Flags: validated before anything is read or written.
    (args,) = parsing.parse_flags(TOKENIZER_FLAG_CLASSES, sys.argv[1:] if argv is None else argv)
    tokenizer_training.check_train_files(args.train_files)
    run_folder.check_new_output_dir(args.output_dir, args.overwrite_output_dir)

    # 2. Logging
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    logger.info("flags: %s", args)

    # 3. Train into a temp folder beside --output_dir, so a crash never leaves a half-written tokenizer there.
    out = Path(args.output_dir).resolve()
    work = run_folder.make_work_dir(out)
    try:
        start = time.time()
        sentencepiece.set_random_generator_seed(args.seed)
        spiece_model = tokenizer_training.train_sentencepiece(args, str(work / "spiece"))
        logger.info("trained %d SentencePiece pieces in %.1f s", args.vocab_size, time.time() - start)

        # 4. T5 tokenizer: pieces + 100 sentinels; save as transformers does, plus the .model for sentencepiece.
        tokenizer = tokenizer_training.build_t5_tokenizer(spiece_model)
        check_t5_tokenizer(tokenizer, str(out))
        final = work / "tokenizer"
        tokenizer.save_pretrained(final)
        shutil.copyfile(spiece_model, final / tokenizer_training.SPIECE_FILE)
        tokenizer_training.check_saved_layout(str(final), args.vocab_size)

        # 5. Publish.
        publish_folder(final, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    logger.info("tokenizer (%d tokens: %d pieces + %d sentinels) written to %s: %s", len(tokenizer),
                args.vocab_size, NUM_SENTINELS, out, ", ".join(sorted(os.listdir(out))))
    return out


if __name__ == "__main__":
    cli.run_cli(main)  # UsageError -> one `error: ...` line on stderr, exit code 2
