"""Export a saved T5 model for serving: a CTranslate2 folder (weights, tokenizer, model card, export_record.json),
checked against the torch model before it is published.

    python export_t5.py --model_name_or_path runs/sst2                    # -> runs/sst2/ctranslate2 (float32)
    python export_t5.py --model_name_or_path runs/sst2 --quantization int8 --output_dir runs/sst2_int8
    python export_t5.py --model_name_or_path runs/rte_lora/merged         # a LoRA run: its merged model
    python predict_t5.py --model_name_or_path runs/sst2 --backend ctranslate2 --input_file ... --output_file ...

The check: the first --probe_examples inputs (--probe_file in the card's task format, else a few built-in
sentences) are decoded greedily by the torch model in fp32 and by the export; a float32 export must give the same
texts (a difference is logged as a warning: two near-equal logits can tie), a quantized one reports its agreement.
Both go into export_record.json. The export is built in a temporary folder and published in one rename; an existing
one is replaced only with --overwrite_output_dir true. A run folder's card gets a section naming the export and its
commands; --push_to_hub true --hub_model_id NAME uploads the export as ctranslate2/ into that repo.
"""
import logging
import sys

from t5kit import cli
from t5kit.config import parsing
from t5kit.config.script_flags import EXPORT_FLAG_CLASSES
from t5kit.data import predict_inputs
from t5kit.model import building, ctranslate2_backend, inference
from t5kit.outputs import export_record, hub_upload, model_card, run_logging

logger = logging.getLogger(__name__)

# Built-in probe inputs: plain sentences, a task-prefixed one and a span-filling one, fed as they are.
PROBE_TEXTS = (
    "The cat sat on the mat and looked out of the window.",
    "sst2 sentence: a gripping, beautifully acted film.",
    "translate English to German: The house is wonderful.",
    "The <extra_id_0> walks in <extra_id_1> park.",
    "Stocks fell sharply on Monday after the central bank raised interest rates again.",
    "cola sentence: The books was on the table.",
    "She said that the meeting would start at nine, but nobody came before ten.",
    "rte sentence1: A man is playing a guitar. sentence2: A person plays music.",
)


def main(argv=None):
    # 1. Flags: the source, the format and precision, the output folder (never replaced without --overwrite_output_dir).
    (args,) = parsing.parse_flags(EXPORT_FLAG_CLASSES, sys.argv[1:] if argv is None else argv)

    # 2. Logging (the console; the export folder holds its record, no run log)
    run_logging.setup_console_logging()

    # 3. What CTranslate2 can take: installed, a model family it converts (LoRA adapters: merge first), a weight
    #    type this machine computes. All refused before anything is written.
    ctranslate2_backend.import_ctranslate2()
    ctranslate2_backend.check_convertible(args.model_name_or_path)
    device = ctranslate2_backend.default_device()
    ctranslate2_backend.check_compute_type(args.quantization, device)
    out = export_record.check_output_dir(args.output_dir or export_record.default_output_dir(args.model_name_or_path),
                                         args.overwrite_output_dir)

    # 4. The probe: the torch model and its tokenizer, the inputs tokenised as predict_t5.py does.
    card = model_card.read_card_section(args.model_name_or_path)
    tokenizer = building.load_tokenizer(args.model_name_or_path, flag="--model_name_or_path")
    model = building.load_pretrained_t5(args.model_name_or_path)
    texts = probe_texts(args, card)
    ids, _ = inference.tokenize_inputs(tokenizer, texts, card.get("max_source_length") or 512)
    expected = inference.predict(model, tokenizer, ids, len(ids), max_new_tokens=args.probe_max_new_tokens,
                                 progress=False)

    def check(folder):
        translator = ctranslate2_backend.load_translator(folder, device, compute_type=args.quantization)
        got = ctranslate2_backend.predict(translator, tokenizer, ids, len(ids),
                                          max_new_tokens=args.probe_max_new_tokens, progress=False)
        return probe_report(args.quantization, texts, expected, got)

    # 5. Convert into a temporary folder, check, record, publish.
    folder = export_record.build_export(args.model_name_or_path, out, args.quantization, check=check,
                                        overwrite=args.overwrite_output_dir)
    logger.info("wrote %s: CTranslate2 %s export of %s", folder, args.quantization, args.model_name_or_path)

    # 6. A run folder's own export: its card says where it is and how to call it.
    if folder == export_record.default_output_dir(args.model_name_or_path):
        model_card.add_export_section(args.model_name_or_path, folder.name, args.quantization)

    # 7. --push_to_hub: the saved export uploaded as ctranslate2/ into the named repo.
    if args.push_to_hub:
        hub_upload.push_export_folder(folder, args.hub_model_id, args.hub_private_repo)
    return folder


def probe_texts(args, card) -> list:
    if not args.probe_file:
        return list(PROBE_TEXTS[:args.probe_examples])
    task_vals = predict_inputs.resolve_task(None, card)
    return predict_inputs.read_inputs(args.probe_file, task_vals, limit=args.probe_examples).texts


def probe_report(quantization, texts, expected, got) -> dict:
    """{examples, identical, differing: [first few (input, torch, ctranslate2)]}, logged."""
    differing = [(text, a, b) for text, a, b in zip(texts, expected, got) if a != b]
    same = len(texts) - len(differing)
    if quantization == "float32" and differing:
        logger.warning("probe: %d of %d float32 predictions differ from the torch model's (first: %r vs %r); "
                       "a tie of near-equal logits can flip, more than one or two cannot", len(differing),
                       len(texts), differing[0][1], differing[0][2])
    else:
        logger.info("probe: %d of %d %s predictions equal the torch model's fp32 ones", same, len(texts),
                    quantization)
    return {"examples": len(texts), "identical": same, "differing": [list(row) for row in differing[:5]]}


if __name__ == "__main__":
    cli.run_cli(main)
