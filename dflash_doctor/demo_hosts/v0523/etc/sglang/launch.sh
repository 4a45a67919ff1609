#!/usr/bin/env bash
# Launch the Kimi-K2.6 server with the DFlash drafter.
set -euo pipefail
MODEL=moonshotai/Kimi-K2.6
DRAFT=/models/Kimi-K2.6-DFlash
export HF_HOME=/data/hf

exec /opt/sglang/venv/bin/python3 -m sglang.launch_server \
  --model-path $MODEL \
  --trust-remote-code \
  --tp-size 8 \
  --speculative-algorithm DFLASH \
  --speculative-draft-model-path $DRAFT \
  --context-length 131072 \
  --page-size 64 \
  --mem-fraction-static 0.85 \
  --max-running-requests 32 \
  --cuda-graph-max-bs-decode 32 \
  --attention-backend fa3 \
  --host 0.0.0.0 \
  --port 30000 \
  --api-key "$SGLANG_API_KEY"
