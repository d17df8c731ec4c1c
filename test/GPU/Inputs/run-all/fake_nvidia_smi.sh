#!/usr/bin/env bash
# nvidia-smi -L in run-all-dry.test: $FAKE_GPUS GPUs.
for ((i = 0; i < ${FAKE_GPUS:-1}; i++)); do
  echo "GPU $i: NVIDIA H200 (UUID: GPU-fake-$i)"
done
