#!/usr/bin/env python3
"""PyTorch's cross-entropy under precfuzz: F.cross_entropy on fp32, fp16 and bf16 logits, forward
and backward, judged by the contract of precfuzz's cross_entropy/logsoftmax-cpu (log_softmax
stored in the logits' dtype with the row's sum and its log held in it too, nll_loss's cascade
sum in it, the backward from the stored log-probabilities). On the GPU (PRECFUZZ_DEVICE=cuda)
ATen keeps the sum and the log in fp32, so it is judged by logsoftmax's contract there.

  precfuzz --kernels exec:"python3 examples/torch_cross_entropy.py" run -k cross_entropy -v torch-cross-entropy -t bf16

The per-row losses are F.cross_entropy(..., reduction="none"); the reduced loss and the gradient
come from the case's reduction (for "none", the gradient of the per-row losses' sum, as
loss.backward(torch.ones_like(loss)) gives). PRECFUZZ_DEVICE=cuda runs it on the GPU."""
# precfuzz-target: kernel=cross_entropy start=exec needs=torch cases=20 variants=torch-cross-entropy
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from precfuzz_kernel import kernel, serve, to_torch  # noqa: E402

DEVICE = os.environ.get("PRECFUZZ_DEVICE", "cpu")


@kernel("cross_entropy", variant="torch-cross-entropy", like="logsoftmax" if DEVICE == "cuda" else "logsoftmax-cpu",
        accums=["fp32"], params={"z_loss": [0, 0]},
        summary=f"F.cross_entropy forward and backward, torch {torch.__version__} on {DEVICE}")
def cross_entropy(case, logits, target):
    p = case.params
    x = to_torch(logits, DEVICE).requires_grad_(True)
    t = torch.from_numpy(target.astype("int64")).to(DEVICE)
    kw = dict(ignore_index=int(p["ignore_index"]), label_smoothing=float(p["label_smoothing"]))
    out = {"loss": F.cross_entropy(x.detach(), t, reduction="none", **kw)}
    loss = F.cross_entropy(x, t, reduction=p["reduction"], **kw)
    if p["reduction"] == "none":
        loss.backward(torch.ones_like(loss))
    else:
        out["reduced"] = loss.detach().reshape(1)
        loss.backward()
    out["dlogits"] = x.grad
    return out


if __name__ == "__main__":
    sys.exit(serve())
