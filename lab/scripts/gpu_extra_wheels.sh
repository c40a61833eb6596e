#!/usr/bin/env bash
# Wheels the staging kit (../shared/device) lacks, cut into folders that each fit one
# `device` transfer, for `lab/scripts/gpu_agenda.sh` to install on the GPU machine.
#
#   bash lab/scripts/gpu_extra_wheels.sh serve        # SGLang's HTTP server: jsonschema, soundfile
#   bash lab/scripts/gpu_extra_wheels.sh flashinfer   # FlashInfer: every NEXTN profile's sampled
#                                                 # verify, and the `baseline` profile's MoE
#   bash lab/scripts/gpu_extra_wheels.sh loadfmt      # the load formats fastsafetensors and
#                                                 # InstantTensor (`load-bench`)
#
# It writes the git-ignored .gpu-extra/ (one folder per transfer) and prints the plan:
# send each folder with `carry` and copy it to /root/extra; gpu_agenda.sh joins split
# wheels there and installs them into /tmp/site.
set -euo pipefail

CHUNK_MIB="${CHUNK_MIB:-40}"  # each folder rides with the tree (about 8 MiB) under 64 MiB
ROOT="$(git rev-parse --show-toplevel)"
OUT="$ROOT/.gpu-extra/${1:-}"
case "${1:-}" in
  serve) WHEELS=(jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0
                 rpds-py==2026.9.1 attrs==26.1.0 soundfile==0.14.0 cffi==2.1.1 pycparser==3.12) ;;
  # flashinfer-python's install requirements that the machine's image does not hold
  # (apache-tvm-ffi comes with the kit); SGLang 0.5.23 pins flashinfer 0.7.2.
  flashinfer) WHEELS=(flashinfer-python==0.7.2 cuda-tile==1.7.0 nccl4py==0.6.0
                      nccl-extensions==0.1.0 nvidia-cudnn-frontend==1.32.0 cuda-python==13.4.4) ;;
  # SGLang 0.5.23's fastsafetensors and instanttensor load formats; neither imports a package
  # the machine lacks (fastsafetensors' one requirement, typer, serves only its command line).
  loadfmt) WHEELS=(fastsafetensors==0.5.0 instanttensor==0.2.2) ;;
  *) echo "usage: $0 serve|flashinfer|loadfmt" >&2; exit 2 ;;
esac

EXCLUDE="$(git rev-parse --path-format=absolute --git-path info/exclude)"  # a worktree's too
grep -qxF "/.gpu-extra/" "$EXCLUDE" 2>/dev/null || echo "/.gpu-extra/" >> "$EXCLUDE"
rm -rf "$OUT" && mkdir -p "$OUT/download"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any -d "$OUT/download" "${WHEELS[@]}"

# Split every wheel into pieces of at most CHUNK_MIB, then pack the pieces into folders.
mkdir -p "$OUT/pieces"
for whl in "$OUT"/download/*.whl; do
  split -b "${CHUNK_MIB}M" -d -a 2 "$whl" "$OUT/pieces/$(basename "$whl").part-"
done
folder=0 used=0
for piece in "$OUT"/pieces/*; do
  size=$(stat -c %s "$piece")
  if (( used > 0 && used + size > CHUNK_MIB * 1024 * 1024 )); then folder=$((folder + 1)) used=0; fi
  dest="$OUT/$(printf 'e%02d' "$folder")"
  mkdir -p "$dest" && mv "$piece" "$dest/"
  used=$((used + size))
done
rm -rf "$OUT/download" "$OUT/pieces"

for dest in "$OUT"/e*; do
  name="${dest#"$ROOT"/}"
  echo "send $name   then run: mkdir -p /root/extra && cp $name/* /root/extra/"
done
