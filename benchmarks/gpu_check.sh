#!/usr/bin/env bash
# One check of protoembed on one CUDA GPU, within 8 minutes, no download (random weights of each paper's
# shape where no weights are installed). Each section runs one benchmark, capped by its own time limit:
#   1. encode   benchmarks/gpu_encode.py: sentences/s of protoembed and sentence-transformers at fp32 / fp16 /
#               bf16, default model shape (6 x 384) and BERT-base (12 x 768, vocabulary 30,522), cosine to
#               fp32; `protoembed encode` on a 200,000-line file; the aims met or not; peak memory;
#   2. serve    benchmarks/serve.py: `protoembed serve` (torch runtime on the GPU, fp32) against the naive
#               server (sentence-transformers on the GPU) at concurrency 64, short and long inputs;
#   3. train    benchmarks/device_check.py --objective conpvp: ConPVP at the paper's batch 128 (plain step,
#               bf16) on both shapes: steps/s, tokens/s, model FLOPs utilisation, peak memory; the aim
#               (BERT-base >= 3 x 6.6 steps/s);
#   4. train    benchmarks/device_check.py: SimCSE at batch 64 (GradCache, mini-batch 32, bf16) through
#               protoembed's trainer against sentence-transformers' own: the same figures;
#   5. ray      benchmarks/encode_ray.py --device cuda: `protoembed encode --engine ray` with one actor on the GPU
#               (--gpus-per-worker 1) against the local encode on it (--devices cuda:0), 10,000 lines; run where
#               Ray is installed (protoembed[ray]), else said and left out;
#   with --full also benchmarks/memory.py (one step's peak, plain against GradCache, ConPVP 128 / 256 and
#   SimCSE 64), benchmarks/train_step.py --mini-batch-size 32 (the cached step's time against the plain one)
#   and benchmarks/train_run.py --rounds 1 --joint (the own-pairs GoogleNews run end to end, protoembed with
#   per-column and with joint padding against sentence-transformers' trainer, both on the GPU).
# Every table starts with the device line: the GPU, the host's cores and the library versions.
# Usage: benchmarks/gpu_check.sh [--device cuda|cpu] [--data DIR] [--smoke] [--full]
#   --data: the staged data (benchmarks/stage_gpu_data.sh copies what is needed into .gpu-data/; default
#   $PROTOEMBED_DATA, else ../shared/data); --device cpu --smoke: the sections on a tiny random model and a
#   few inputs (serve left out: serve.py --smoke runs on its own), in about a minute on a quiet CPU
#   (tests/test_benchmarks_smoke.py runs it).
# Needs: the project installed (`make install`; on a machine with torch, transformers and sentence-transformers
# already: pip install --no-deps -e . plus its other requirements), the staged data. All checked up front: each
# thing missing is named with the one command that brings it, before anything runs. Last line: ratio= of
# section 1 (protoembed's fastest default-shape encode within cosine 0.9999 / sentence-transformers' default).
set -uo pipefail
device=cuda smoke=0 full=0 data=""
while [ $# -gt 0 ]; do
    case "$1" in
        --device) device="$2"; shift 2 ;;
        --data) data="$2"; shift 2 ;;
        --smoke) smoke=1; shift ;;
        --full) full=1; shift ;;
        *) echo "usage: $0 [--device cuda|cpu] [--data DIR] [--smoke] [--full]" >&2; exit 2 ;;
    esac
done
data="${data:-${PROTOEMBED_DATA:-$(dirname "$0")/../../shared/data}}"
[ -d "$data" ] && data="$(cd "$data" && pwd)"
cd "$(dirname "$0")"
python="${PYTHON:-../.venv/bin/python}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONWARNINGS=ignore PROTOEMBED_DATA="$data"
missing=()
if ! "$python" -c "" 2>/dev/null; then
    missing+=("no Python at $python: run 'make install' in the repository (or set PYTHON=/path/to/python)")
else
    # the packages the benchmarks import: the project's own (make install), the bench extra's (datasets), serve's
    absent=$("$python" -c "
import importlib.util
for name in ('torch', 'protoembed', 'transformers', 'sentence_transformers', 'tokenizers', 'accelerate', 'yaml',
             'fastapi', 'uvicorn', 'datasets'):
    if importlib.util.find_spec(name) is None:
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
    else
        for name in $("$python" gpu_encode.py --data-files); do
            [ -e "$data/$name" ] || missing+=("no $data/$name: benchmarks/stage_gpu_data.sh copies it into .gpu-data (then --data .gpu-data), or protoembed data download senteval wiki1m-sample")
        done
    fi
fi
if [ ${#missing[@]} -gt 0 ]; then
    for line in "${missing[@]}"; do echo "gpu_check: $line" >&2; done
    exit 1
fi
if [ "$device" = cuda ]; then
    "$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
        || { echo "gpu_check: no CUDA device (use --device cpu)" >&2; exit 1; }
fi
start=$SECONDS
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=()
# section NAME SECONDS COMMAND...: run it under its time limit, its output shown and kept
section() {
    local name="$1" limit="$2"; shift 2
    echo "== $name (at most $limit s)"
    local begun=$SECONDS
    timeout --kill-after=10 "$limit" "$@" 2> >(tee "$work/$name.err" >&2) | tee "$work/$name.out"
    local status=${PIPESTATUS[0]}
    if [ "$status" = 124 ] || [ "$status" = 137 ]; then
        failed+=("$name: stopped at its limit of $limit s")
    elif [ "$status" != 0 ]; then
        failed+=("$name: exit $status: $(grep -v '^\s*$' "$work/$name.err" | tail -1)")
    fi
    echo "   ($name: $((SECONDS - begun)) s)"
}
cores=$(nproc)
if [ "$smoke" = 1 ]; then
    tiny=(--smoke) serve_load=(--smoke) train_common=(--smoke)
    limits=(120 120 120 120 120)
else
    tiny=() serve_load=(--concurrency 64 --duration 8 --rounds 1 --warmup 2 --requests 100000)
    train_common=(--steps 20 --warmup 3 --precision bf16 --tokens 32)
    limits=(220 80 50 80 50)
fi
section encode "${limits[0]}" "$python" gpu_encode.py --device "$device" --data "$data" --tokenizer-workers "$cores" \
    --keep-models "$work/models" "${tiny[@]}"
# the default model's folder for the sections below (random weights of its shape where not installed)
if [ "$smoke" = 0 ] && [ -d "$work/models/default" ]; then
    export PROTOEMBED_BENCH_DEFAULT_MODEL="$work/models/default"
fi
bert="$work/models/bert-base"
[ -d "$bert" ] || bert=bert-base
# a smoke run leaves serve out: serve.py --smoke is run on its own (tests/test_benchmarks_smoke.py)
[ "$smoke" = 1 ] || section serve "${limits[1]}" "$python" serve.py --servers protoembed-torch,naive --device "$device" \
    --serve-args "--device $device" --data-dir "$data" "${serve_load[@]}"
section conpvp "${limits[2]}" "$python" device_check.py --device "$device" --objective conpvp --models "default,$bert" \
    --batch-size 128 --mini-batch-size 0 --data-dir "$data" "${train_common[@]}"
if [ "$smoke" = 1 ]; then
    :  # a smoke run leaves ray out: encode_ray.py --smoke is run on its own (tests/test_benchmarks_smoke.py)
elif "$python" -c "import ray" 2>/dev/null; then
    section ray "${limits[4]}" "$python" encode_ray.py --device "$device" --lines 10000 --rounds 1
else
    echo "== ray: not run (Ray is not installed: $python -m pip install -e '.[ray]')"
fi
section simcse "${limits[3]}" "$python" device_check.py --device "$device" --objective simcse --models "default,$bert" \
    --batch-size 64 --mini-batch-size 32 --data-dir "$data" "${train_common[@]}"
if [ "$full" = 1 ]; then
    section memory 300 "$python" memory.py --device "$device" --models "default,bert-base" --objectives conpvp \
        --batches 128,256 --precisions bf16 --row-timeout 120 --data-dir "$data" "${tiny[@]}"
    section train_step 200 "$python" train_step.py --device "$device" --mini-batch-size 32 --batch-size 128 \
        --steps 10 --data-dir "$data" "${tiny[@]}"
    section train_run 600 env PROTOEMBED_DATA="$data" "$python" train_run.py --rounds 1 --joint "${tiny[@]}"
fi
echo "== summary ($((SECONDS - start)) s)"
for name in encode serve conpvp ray simcse memory train_step train_run; do
    [ -f "$work/$name.out" ] && echo "$name: $(grep -h '^ratio=' "$work/$name.out" | tail -1)"
done
for line in ${failed[@]+"${failed[@]}"}; do echo "gpu_check: $line"; done
grep -h '^ratio=' "$work/encode.out" | tail -1 || echo "ratio=nan"
[ ${#failed[@]} = 0 ]
