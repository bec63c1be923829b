#!/usr/bin/env bash
# Session 72, call 1: session 71's call 3 (the idle give-back's GPU test, the served memory
# after a load and once idle, what the give-back costs the next work), plus the served memory
# with a batched prefill pass capped at 2,048 tokens (RWKV_PREFILL_TOKENS; 16,384 served):
# does the load's peak, a batched prefill pass, then stay within 10 GB all told?
#   OUT=$OUT bash docs/experiments/session72/call1.sh   (TOTAL=300: trim_cost.py gets what is left)
CAPS="0 2048" TOTAL=${TOTAL:-470} exec bash "$(dirname "$0")/../session71/call3.sh"
