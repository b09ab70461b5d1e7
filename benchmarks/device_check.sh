#!/usr/bin/env bash
# One check of the large-batch training on a CUDA GPU, under 5 minutes (bf16):
#   1. benchmarks/memory.py: peak memory of one step, plain against GradCache (mini_batch_size 32), on the
#      default backbone and the BERT-base shape at the papers' batches (ConPVP 128, and 256 for its
#      ratio= line; SimCSE 64);
#   2. benchmarks/train_step.py --mini-batch-size 32: the cached step's time against the plain step at
#      ConPVP's batch 128, and the data time of a step against its model time;
#   3. benchmarks/device_check.py: SimCSE at batch 64 through protoembed's trainer and through
#      sentence-transformers' own trainer with CachedMultipleNegativesRankingLoss: steps/s, tokens/s,
#      peak memory per row, ratio=<protoembed steps/s / sentence-transformers steps/s>.
# Usage: benchmarks/device_check.sh [--device cuda|cpu]   (cpu: the same steps on tiny settings)
# Needs: the project installed with its bench extra (`make install` does: its dev extra takes datasets in; else
# pip install -e '.[bench]'), PROTOEMBED_DATA with the staged Wikipedia sample. All checked up front: each
# thing missing is named with the one command that brings it, before anything runs.
set -euo pipefail
device=cuda
while [ $# -gt 0 ]; do
    case "$1" in
        --device) device="$2"; shift 2 ;;
        *) echo "usage: $0 [--device cuda|cpu]" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")"
python="${PYTHON:-../.venv/bin/python}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONWARNINGS=ignore
export PROTOEMBED_DATA="${PROTOEMBED_DATA:-../../shared/data}"
missing=()
if ! "$python" -c "" 2>/dev/null; then
    missing+=("no Python at $python: run 'make install' in the repository (or set PYTHON=/path/to/python)")
else
    # the packages the three benchmarks import: the project's own (make install) and the bench extra's
    absent=$("$python" -c "
import importlib
for name in ('torch', 'protoembed', 'transformers', 'sentence_transformers', 'accelerate', 'datasets'):
    try:
        importlib.import_module(name)
    except Exception:
        print(name)
" 2>/dev/null)
    if [ -n "$absent" ]; then
        names=$(echo $absent | tr ' ' ',')
        if [ "$absent" = datasets ]; then
            fix="$python -m pip install -e '.[bench]' (in the repository)"
        else
            fix="run 'make install' in the repository (or $python -m pip install -e '.[bench]')"
        fi
        missing+=("$python lacks ${names//,/, }: $fix")
    fi
fi
if ! compgen -G "$PROTOEMBED_DATA/unsup/wiki1m_sample/*.txt" >/dev/null; then
    missing+=("no Wikipedia sample under $PROTOEMBED_DATA/unsup/wiki1m_sample: protoembed data download wiki1m-sample (or set PROTOEMBED_DATA)")
fi
if [ ${#missing[@]} -gt 0 ]; then
    for line in "${missing[@]}"; do echo "device_check: $line" >&2; done
    exit 1
fi
start=$SECONDS
if [ "$device" = cuda ]; then
    "$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
        || { echo "device_check: no CUDA device (use --device cpu)" >&2; exit 1; }
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
    echo "== memory: ConPVP"
    "$python" memory.py --device cuda --models default,bert-base --objectives conpvp --batches 128,256 \
        --precisions bf16 --row-timeout 120
    echo "== memory: SimCSE"
    "$python" memory.py --device cuda --models default,bert-base --objectives simcse --batches 64 \
        --precisions bf16 --row-timeout 120
    echo "== train_step: cached against plain, data against model time"
    "$python" train_step.py --device cuda --mini-batch-size 32 --batch-size 128 --steps 10
    echo "== protoembed against sentence-transformers (SimCSE, CachedMultipleNegativesRankingLoss)"
    "$python" device_check.py --device cuda --models default,bert-base --batch-size 64 --mini-batch-size 32 \
        --steps 20 --warmup 3 --precision bf16
else
    echo "== memory (tiny: 1 layer, batch 8, mini_batch_size 4)"
    "$python" memory.py --device cpu --models default --objectives conpvp,simcse --batches 8 \
        --precisions fp32 --mini-batch-size 4 --layers 1 --threads 1
    echo "== train_step (tiny)"
    "$python" train_step.py --device cpu --mini-batch-size 4 --batch-size 8 --steps 1 --tokens 16 --threads 1
    echo "== protoembed against sentence-transformers (tiny)"
    "$python" device_check.py --device cpu --models default --batch-size 8 --mini-batch-size 4 --steps 2 \
        --warmup 1 --precision fp32 --tokens 16
fi
echo "device_check: done in $((SECONDS - start)) s"
