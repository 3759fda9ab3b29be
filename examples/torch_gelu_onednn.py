#!/usr/bin/env python3
"""F.gelu as a user calls it on an x86 CPU: with oneDNN on (PyTorch's default), fp32 and bf16 in
the erf form run oneDNN's gelu_erf, a polynomial of its own that precfuzz does not emulate; fp16
and the tanh form run ATen's kernel (examples/torch_gelu.py). Judged by the contract of ATen's
kernel (gelu/torch), oneDNN's fp32 erf form is less accurate in the negative tail than ATen's
Abramowitz-Stegun erf promises: tests/torch_gelu.sh asserts the finding (a few percent beyond the
bound around x = -2.7, docs/kernels/gelu.md). No target line: its findings are expected.

  precfuzz --kernels exec:"python3 examples/torch_gelu_onednn.py" run -k gelu -v torch-gelu -t fp32 --scale 4
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from precfuzz_kernel import kernel, serve, to_torch  # noqa: E402

torch.set_num_threads(1)


@kernel("gelu", variant="torch-gelu", like="torch", summary=f"F.gelu (oneDNN on), torch {torch.__version__} on cpu")
def gelu(case, x):
    return {"y": F.gelu(to_torch(x, "cpu"), approximate=case.params["approximate"])}


if __name__ == "__main__":
    sys.exit(serve())
