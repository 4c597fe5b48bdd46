#!/usr/bin/env bash
# One chunk of the GPU depth grid (docs/trainer.md, "In chunks"), as one call on a borrowed GPU
# machine that has python3 with CUDA torch, numpy and pandas but no network. From the repo root.
#
# Prepared once on a machine with network (both folders are ignored by git; carry them):
#   SCALEFIT_CACHE_DIR=.cache/gpu scalefit data prepare brown --tokenizer bpe --bpe-vocab 8192
#   python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux_2_17_x86_64 -d .whl \
#       jsonschema jsonschema-specifications referencing rpds-py
# Then, there:  bash docs/studies/gpu_chunk.sh [MINUTES]   (default 6: the machine's start-up and
# the copies take the rest of a 9-minute call). The merged table is data/lm_grid_gpu_depth.csv,
# also copied to $OUT when that is set; commit it.
set -euo pipefail
MINUTES=${1:-6}
GRID=${GRID:-configs/grid_gpu_depth.toml}
TABLE=${TABLE:-data/lm_grid_gpu_depth.csv}
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
export SCALEFIT_CACHE_DIR=${SCALEFIT_CACHE_DIR:-$PWD/.cache/gpu}
python3 -c "import torch; print('device:', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu', 'torch', torch.__version__)"
status=0
python3 -m scalefit train grid "$GRID" --out "$SCALEFIT_CACHE_DIR/runs" --workers 0 \
    --resume-from "$TABLE" --max-minutes "$MINUTES" || status=$?
if [ -n "${OUT:-}" ] && [ -f "$TABLE" ]; then cp "$TABLE" "$OUT/"; fi
exit $status
