#!/usr/bin/env bash
# Copy the data benchmarks/gpu_check.sh reads (benchmarks/gpu_encode.py --data-files: about 8 MB of SentEval
# sentences, STS-B and the Wikipedia sample) from the data directory into .gpu-data/ at the repository's root
# (ignored by git), so that a GPU machine that does not see the data directory gets it with the repository:
#   benchmarks/stage_gpu_data.sh [DATA_DIR]      (default: $PROTOEMBED_DATA, else ../shared/data)
# then, on the GPU machine, from the repository's root:
#   benchmarks/gpu_check.sh --data .gpu-data
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
data="${1:-${PROTOEMBED_DATA:-$root/../shared/data}}"
python="${PYTHON:-$root/.venv/bin/python}"
target="$root/.gpu-data"
files=$("$python" "$root/benchmarks/gpu_encode.py" --data-files)
missing=0
for name in $files; do
    [ -e "$data/$name" ] || { echo "stage_gpu_data: no $data/$name (protoembed data download senteval wiki1m-sample)" >&2; missing=1; }
done
[ "$missing" = 0 ] || exit 1
for name in $files; do
    mkdir -p "$target/$(dirname "$name")"
    cp -r "$data/$name" "$target/$(dirname "$name")/"
done
echo "stage_gpu_data: $(du -sh "$target" | cut -f1) in $target; on the GPU machine: benchmarks/gpu_check.sh --data .gpu-data"
