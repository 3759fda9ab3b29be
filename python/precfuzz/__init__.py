"""precfuzz from Python: exact-oracle verdicts on your own kernels and on a training run's tensors.

    import precfuzz, torch

    res = precfuzz.check(lambda x: torch.softmax(x, -1), op="softmax", like="safe", to="torch")
    assert res.ok, res.report()        # or, in pytest: the `precfuzz` fixture

    j = precfuzz.judge("softmax", {"x": logits}, probs, like="safe")   # tensors from a run

check() runs a callable as a variant of one of precfuzz's operations on generated cases and
returns findings (contract broken) and hazards (contract kept, result useless for training),
each with a shell line that replays it; judge() judges outputs computed elsewhere; the pytest
plugin (precfuzz.pytest_plugin, loaded by pytest once the package is installed) gives the
`precfuzz` fixture and the `precfuzz` marker; precfuzz.strategies has Hypothesis strategies
for fp16/bf16/fp32 tensors; precfuzz.capture records a PyTorch step's ops with their tensors,
precfuzz.judge_capture judges them.
The precfuzz executable is found as precfuzz.binary() says.
"""

from ._binary import PrecfuzzError, PrecfuzzNotFound, binary
from .checking import CheckResult, Finding, Hazard, check, op_info, replay_command
from .capturing import capture, judge_capture
from .judging import Judgement, judge
from .protocol import from_torch, numpy_dtype, to_torch

__version__ = "0.1.0"

__all__ = [
    "CheckResult", "Finding", "Hazard", "Judgement", "PrecfuzzError", "PrecfuzzNotFound", "binary", "capture",
    "check", "from_torch", "judge", "judge_capture", "numpy_dtype", "op_info", "replay_command", "to_torch",
]
