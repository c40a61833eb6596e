"""A checkpoint folder checked against what SGLang 0.5.23's BailingMoeV3 loader reads, from the
safetensors headers alone (no torch, no tensor data), before minutes of loading."""
