"""Predictions of a T5 model on a file: the task's text-to-text format, length-sorted batches with dynamic padding,
generation (greedy or beams) or label-word ranking, one output row per example in input order.

    python predict_t5.py --model_name_or_path runs/finetune_rte_quickstart \\
        --input_file ../shared/data/glue/RTE/dev.tsv --output_file runs/rte_dev.jsonl   # task: the card's, glue/rte
    python predict_t5.py --model_name_or_path runs/finetune_rte_quickstart --input_file pairs.csv \\
        --label_scoring rank --output_file pairs_predictions.tsv
    python predict_t5.py --model_name_or_path runs/quickstart --input_file spans.txt --output_file filled.jsonl
                                                                         # span filling: <extra_id_N> -> the text

Output columns: line (of the input file), input (as the model read it), prediction, and with span filling the
input with its sentinels filled (filled). Nothing is written before every input has been checked.
"""
import logging
import sys
import time

import constants
from t5kit import cli
from t5kit.config import parsing
from t5kit.config.script_flags import PREDICT_FLAG_CLASSES
from t5kit.data import predict_inputs
from t5kit.model import inference, predictors
from t5kit.outputs import model_card, run_logging
from t5kit.outputs.predictions import write_predict_file

logger = logging.getLogger(__name__)


def main(argv=None):
    # 1. Flags: the files, the output path (never clobbered without --overwrite) and the numbers, checked first.
    (args,) = parsing.parse_flags(PREDICT_FLAG_CLASSES, sys.argv[1:] if argv is None else argv)

    # 2. Logging (the console; predicting writes one file, no run folder)
    run_logging.setup_console_logging()

    # 3. Task: --task, else the one the model card records; without one the inputs are fed as they are.
    card = model_card.read_card_section(args.model_name_or_path)
    task_vals = predict_inputs.resolve_task(args.task, card)
    predict_inputs.check_label_scoring(args.label_scoring, task_vals)

    # 4. Inputs: read, checked (columns, blank rows) and formatted before any model is loaded.
    inputs = predict_inputs.read_inputs(args.input_file, task_vals, args.text_column, args.max_predict_samples)
    span_filling = task_vals is None and any(map(predict_inputs.has_sentinels, inputs.texts))

    # 5. Model, then tokenizer (a folder of another architecture, or one without a tokenizer, is refused here): the
    #    --backend's predictor (model/predictors.py): torch's generate, or a CTranslate2 Translator on a fresh
    #    export, an export folder, or a conversion made now.
    predictor = predictors.load(args.backend, args.model_name_or_path, args.tokenizer_name_or_path,
                                predictors.PredictorSettings(use_cpu=args.use_cpu, bf16=args.bf16, fp16=args.fp16,
                                                             compute_type=args.compute_type, threads=args.threads,
                                                             compile=args.compile))
    tokenizer = predictor.tokenizer

    # 6. Tokenise: inputs cut to the length the model was trained with (the card's), counted.
    max_source_length = args.max_source_length or card.get("max_source_length") or constants.INPUT_LENGTH
    input_ids, truncated = inference.tokenize_inputs(tokenizer, inputs.texts, max_source_length)
    if truncated:
        logger.warning("%d of %d inputs cut to %d tokens (--max_source_length)", truncated, len(input_ids),
                       max_source_length)

    # 7. Generation length: the task's longest target unless --max_new_tokens says otherwise.
    max_new_tokens = args.max_new_tokens or predict_inputs.generation_length(task_vals, card, tokenizer)
    label_words = list(task_vals["labels"].values()) if args.label_scoring == "rank" else None
    logger.info("%s: %d examples, task %s, %s, batches of %d sorted by length, %s", args.input_file,
                len(input_ids), task_vals["name"] if task_vals else "none (inputs as they are)",
                "label words ranked" if label_words else f"{args.num_beams} beam(s), <= {max_new_tokens} new tokens",
                args.batch_size, predictor.description)

    # 8. Predict in length-sorted batches, each padded to its own longest input.
    start = time.perf_counter()
    predictions = predictor.predict(input_ids, args.batch_size, label_words=label_words,
                                    max_new_tokens=max_new_tokens, num_beams=args.num_beams,
                                    keep_sentinels=span_filling, progress=not args.disable_tqdm)
    seconds = time.perf_counter() - start

    # 9. Write one row per example, in input order.
    rows = [{"line": line, "input": text, "prediction": prediction}
            for line, text, prediction in zip(inputs.lines, inputs.texts, predictions)]
    columns = ["line", "input", "prediction"]
    if span_filling:
        columns.append("filled")
        for row in rows:
            row["filled"] = predict_inputs.fill_spans(row["input"], row["prediction"])
    path = write_predict_file(args.output_file, rows, columns)
    logger.info("wrote %s: %d predictions in input order (%.1f examples/s)", path, len(rows), len(rows) / seconds)
    return rows


if __name__ == "__main__":
    cli.run_cli(main)
