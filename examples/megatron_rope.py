#!/usr/bin/env python3
"""Megatron-core's rotary embeddings under precfuzz: RotaryEmbedding's own frequency table and
angles (get_freqs_non_repeated: torch.arange(n, dtype=inv_freq.dtype) + offset, seq *= 1 / factor,
torch.outer) and rope_utils' _apply_rotary_pos_emb_bshd (cos and sin cast to t's dtype,
t * cos + rotate_half(t) * sin), megatron-core 0.16.1 on PyTorch's CPU, judged by the contract of
precfuzz's rope/torch. accum=storage casts inv_freq to t's dtype first, as a model cast to bf16
does with a table kept as a buffer: the positions, angles, cos and sin are then of that dtype.
ntk scaling passes Megatron the scaled base B f^(dim/(dim-2)), as HF's NTK-aware rotary does.

  precfuzz --kernels exec:"python3 examples/megatron_rope.py" run -k rope -v megatron-rope -t bf16

PRECFUZZ_DEVICE=cuda runs the same ops on the GPU (scripts/gpu-check.sh does)."""
# precfuzz-target: kernel=rope start=exec needs=frameworks cases=30 variants=megatron-rope
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402
from megatron.core.models.common.embeddings.rope_utils import _apply_rotary_pos_emb_bshd  # noqa: E402
from megatron.core.models.common.embeddings.rotary_pos_embedding import RotaryEmbedding  # noqa: E402

from precfuzz_kernel import kernel, serve, to_torch  # noqa: E402

DEVICE = os.environ.get("PRECFUZZ_DEVICE", "cpu")
torch.set_num_threads(1)


@kernel("rope", variant="megatron-rope", like="torch",
        summary=f"Megatron-core RotaryEmbedding + _apply_rotary_pos_emb_bshd, torch {torch.__version__} on {DEVICE}")
def rope(case, t):
    positions, heads, dim = case.shape
    p = case.params
    base, factor, scaling = float(p["base"]), float(p["factor"]), p["scaling"]
    if scaling == "ntk":
        base = base * factor ** (dim / (dim - 2))
    emb = RotaryEmbedding(kv_channels=dim, rotary_percent=1.0, rotary_interleaved=p["layout"] == "interleaved",
                          seq_len_interpolation_factor=factor if scaling == "linear" else None, rotary_base=base,
                          use_cpu_initialization=True)
    x = to_torch(t, DEVICE).reshape(positions, 1, heads, dim)
    emb.inv_freq = emb.inv_freq.to(DEVICE)
    if case.accum != "fp32":
        emb.inv_freq = emb.inv_freq.to(x.dtype)
    freqs = emb.get_freqs_non_repeated(positions, int(p["offset"]))  # [positions, dim / 2]
    if emb.rotary_interleaved:
        full = torch.stack((freqs.view(-1, 1), freqs.view(-1, 1)), dim=-1).view(freqs.shape[0], -1)
    else:
        full = torch.cat((freqs, freqs), dim=-1)  # RotaryEmbedding.get_emb's, which wants a GPU
    y = _apply_rotary_pos_emb_bshd(x, full[:, None, None, :], rotary_interleaved=emb.rotary_interleaved)
    return {"y": y.reshape(positions, heads, dim)}


if __name__ == "__main__":
    sys.exit(serve())
