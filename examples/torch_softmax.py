#!/usr/bin/env python3
"""PyTorch's softmax under precfuzz: torch.softmax(x, dim=-1) on fp32, fp16 and bf16 rows,
judged by the contract of precfuzz's softmax/safe (max subtracted, fp32 accumulation, which is
what ATen's softmax kernels do for every dtype).

  precfuzz --kernels exec:"python3 examples/torch_softmax.py" run -k softmax -v torch-softmax -t fp16 --cases 200

The operation's scale and causal mask (parameters alpha and mask) are applied the way a
caller of torch.softmax applies them: x * alpha in fp32 (alpha rounded to fp32), masked
positions set to the mask value, then torch.softmax in fp32 (with a mask, torch._safe_softmax:
the same bits, but 0 on a row masked whole by -inf where torch.softmax gives NaN, as SDPA
does) and the result rounded to the
storage dtype. Without them (alpha 1, no mask) torch.softmax runs on the tensor as it is.
PRECFUZZ_DEVICE=cuda runs it on the GPU (scripts/gpu-check.sh does)."""
# precfuzz-target: kernel=softmax start=exec needs=torch cases=100 variants=torch-softmax
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402

from precfuzz_kernel import kernel, serve, to_torch  # noqa: E402

DEVICE = os.environ.get("PRECFUZZ_DEVICE", "cpu")
LOWEST = {"fp32": torch.finfo(torch.float32).min, "fp16": torch.finfo(torch.float16).min,
          "bf16": torch.finfo(torch.bfloat16).min}


@kernel("softmax", variant="torch-softmax", like="safe", accums=["fp32"],
        summary=f"torch.softmax(x, -1), torch {torch.__version__} on {DEVICE}")
def softmax(case, x):
    t = to_torch(x, DEVICE)
    alpha, mask = case.params["alpha"], case.params["mask"]
    if alpha == 1 and mask == "none":
        return torch.softmax(t, dim=-1)
    s = t.float() * torch.tensor(alpha, dtype=torch.float32)
    if mask != "none":  # causal: row i sees columns j <= i + cols - rows (none for i < rows - cols); top-left: j <= i
        rows, cols = s.shape
        keep = torch.ones(rows, cols, dtype=torch.bool, device=DEVICE).tril(cols - rows if mask == "causal" else 0)
        value = {"-inf": float("-inf"), "-10000": -10000.0, "lowest": LOWEST[case.dtype]}[case.params["mask_value"]]
        s = s.masked_fill(~keep, value)
    # masked: PyTorch's own masked softmax (what scaled_dot_product_attention runs), torch.softmax
    # except that a row masked whole by -inf is 0 rather than torch.softmax's NaN
    return (torch._safe_softmax(s, -1) if mask != "none" else torch.softmax(s, dim=-1)).to(t.dtype)


if __name__ == "__main__":
    sys.exit(serve())
