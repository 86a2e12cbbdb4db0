#!/usr/bin/env bash
# The recipe's ablation table (docs/quality.md, "What was tried on the recipe"): each line changes one setting of
# configs/pretrain_cpu.yaml and runs bench/quality.py on SST-2, seeds 1-3, ~5 min a line on 2 cores (~2 h in all).
# Needs `make bench-quality` first: its corpus, tokenizer and random-init fine-tunes are reused where the model's
# shape and tokenizer stay the recipe's. Output: runs/abl_NAME/quality.json, and the printed lines in runs/ablations.log.
#   bash bench/quality_ablations.sh                 # every line
#   bash bench/quality_ablations.sh sched_cosine    # the lines named
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
BASE=runs/bench_quality
C=$BASE/corpus
FILES="$C/train.txt $C/sst2_train.txt $C/rte_train.txt $C/cola_train.txt"
[ -d "$BASE/tokenizer" ] || { echo "error: $BASE/tokenizer is missing; run make bench-quality first" >&2; exit 2; }
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline

run() {  # NAME REUSE(yes: recipe's tokenizer and random init | shape: recipe's tokenizer | no) TRAIN_FILES FLAGS [BENCH ARGS]
  local name=$1 reuse=$2 files=$3 flags=$4 work=runs/abl_$1
  shift 4
  if [ -n "$ONLY" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
  mkdir -p "$work/finetune"
  cp -r "$C" "$work/"
  if [ "$reuse" != no ]; then cp -r "$BASE/tokenizer" "$work/"; fi
  if [ "$reuse" = yes ]; then cp -r "$BASE"/finetune/sst2_random_init_seed* "$work/finetune/"; fi
  echo "=== $name: $flags $*" | tee -a runs/ablations.log
  $PY bench/quality.py --reuse --tasks sst2 --curve_steps --work_dir "$work" \
      --pretrain_overrides="--train_files $files $flags" "$@" 2>&1 | tee -a runs/ablations.log | grep -E "^(pre-training|sst2)"
}
ONLY="$*"
run no_word_vectors yes "$FILES" "--init_embeddings random"
run books_only_word_vectors yes "$C/train.txt" ""
run deep_narrow shape "$FILES" "--config_overrides num_layers=4,d_model=96,d_ff=384,d_kv=24"
run wide_shallow shape "$FILES" "--config_overrides num_layers=1,d_model=192,d_ff=768,d_kv=48"
run sched_constant yes "$FILES" "--lr_scheduler_type constant_with_warmup"
run sched_cosine yes "$FILES" "--lr_scheduler_type cosine"
run sched_inverse_sqrt yes "$FILES" "--lr_scheduler_type inverse_sqrt"
run lr_1e3 yes "$FILES" "--learning_rate 0.001"
run lr_1e2 yes "$FILES" "--learning_rate 0.01"
run adafactor_t5 yes "$FILES" "--optim adafactor --learning_rate 0.01 --lr_scheduler_type constant --warmup_steps 0"
run adafactor_lr3e3 yes "$FILES" "--optim adafactor --learning_rate 0.003"
run adamw_scale_nanot5 yes "$FILES" "--adamw_rms_scaling true --learning_rate 0.02 --lr_scheduler_type cosine"
run adamw_scale_lr3e3 yes "$FILES" "--adamw_rms_scaling true"
run batch64_250 yes "$FILES" "--per_device_train_batch_size 64 --max_steps 250 --warmup_steps 50 --eval_steps 125"
run batch16_1000 yes "$FILES" "--per_device_train_batch_size 16 --max_steps 1000 --warmup_steps 200 --eval_steps 500"
run density_015 yes "$FILES" "--noise_density 0.15"
run span_8 yes "$FILES" "--mean_noise_span_length 8"
run input_128 yes "$FILES" "--input_length 128"
run dropout_01 yes "$FILES" "--dropout_rate 0.1" --finetune_overrides="--dropout_rate 0.0"
run vocab_4000 no "$FILES" "" --vocab_size 4000
run vocab_16000 no "$FILES" "" --vocab_size 16000
run recipe_seed7 yes "$FILES" "--seed 7"
run input_128_seed7 yes "$FILES" "--input_length 128 --seed 7"
