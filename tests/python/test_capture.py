"""precfuzz.capture: a PyTorch step's softmax, cross-entropy, attention and AdamW recorded with
their tensors and judged afterwards by the contracts PyTorch's kernels claim."""

import json
import os
import shlex
import subprocess

import numpy as np
import pytest

import precfuzz

torch = pytest.importorskip("torch")
F = torch.nn.functional


def step(path, **kw):
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 8).to(torch.bfloat16)
    opt = torch.optim.AdamW(lin.parameters(), lr=1e-3, weight_decay=0.01)
    x = torch.randn(4, 16, dtype=torch.bfloat16)
    q = torch.randn(1, 2, 8, 4, dtype=torch.float16)
    with precfuzz.capture(path, **kw) as cap:
        z = lin(x)
        torch.softmax(z, -1)
        torch.softmax(z, 0)  # not precfuzz's: skipped
        o = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        F.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(8, 8, dtype=torch.bool))  # skipped
        loss = F.cross_entropy(z.float(), torch.tensor([1, 2, 3, 0])) + 0 * o.float().sum()
        loss.backward()
        opt.step()
    return cap


def test_a_step_is_recorded_and_judged(tmp_path):
    cap = step(tmp_path / "cap")
    assert [(r["op"], r["like"], r["dtype"]) for r in cap.records] == [
        ("softmax", "safe", "bf16"), ("attention", "flash", "fp16"), ("cross_entropy", "logsoftmax-cpu", "fp32"),
        ("adam", "torch", "bf16"), ("adam", "torch", "bf16")]
    assert [op for op, _ in cap.skipped] == ["softmax", "attention"]
    assert "dimension 0" in cap.skipped[0][1] and "mask tensor" in cap.skipped[1][1]
    adam = cap.records[3]["params"]
    assert adam == {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "wd": 0.01, "step": 1}
    js = cap.judge()
    assert [j.verdict for j in js] == ["ok"] * 5, "\n".join(str(j) for j in js)
    assert js[1].raw["case"]["params"]["mask"] == "causal-top-left"
    assert js[3].judged == 3 * 128  # m, v and the parameter of the 8x16 weight
    # the manifest, and each record's replay line from another directory
    man = json.load(open(tmp_path / "cap" / "capture.json"))
    assert man["format"] == "precfuzz-capture/1" and len(man["records"]) == 5 and len(man["skipped"]) == 2
    r = subprocess.run(shlex.split(js[2].replay), cwd="/", capture_output=True, text=True)
    assert r.returncode == 0 and ": ok" in r.stdout, r.stdout + r.stderr


def test_a_wrong_output_is_found(tmp_path):
    cap = step(tmp_path / "cap", ops=("softmax",))
    assert [r["op"] for r in cap.records] == ["softmax"]
    out = cap.records[0]["outputs"]
    y = np.load(out).view(np.uint16)
    y[0, 0] += 3  # three bf16 ulps further from zero (a positive probability)
    np.save(out, y.view(precfuzz.numpy_dtype("bf16")))
    (j,) = precfuzz.judge_capture(tmp_path / "cap")
    assert j.verdict == "inaccurate" and j.max_ulps >= 3 and "[0,0]" in j.detail


def test_limits_and_bad_arguments(tmp_path):
    cap = step(tmp_path / "a", ops=("softmax", "adam"), limit=1)
    assert [r["op"] for r in cap.records] == ["softmax", "adam"]
    assert ("adam", "more than limit=1 records") in cap.skipped
    cap = step(tmp_path / "b", ops=("softmax",), max_elements=16)
    assert not cap.records and "a tensor of 32 elements (max_elements=16)" in cap.skipped[0][1]
    with pytest.raises(ValueError, match="is not an empty directory"):
        precfuzz.capture(tmp_path / "a")
    with pytest.raises(ValueError, match="limit=0: an integer >= 1"):
        precfuzz.capture(tmp_path / "e", limit=0)
    with pytest.raises(ValueError, match="no op 'matmul'"):
        precfuzz.capture(tmp_path / "c", ops=("matmul",))
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "capture.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="not a precfuzz capture"):
        precfuzz.judge_capture(tmp_path / "d")
    (tmp_path / "d" / "capture.json").write_text('{"format": "precfuzz-capture/1", "records": [{"op": "softmax"}]}')
    with pytest.raises(ValueError, match=r"records\[0\]\.like: missing or not a str"):
        precfuzz.judge_capture(tmp_path / "d")
    (tmp_path / "d" / "capture.json").write_text('{"format": ')
    with pytest.raises(ValueError, match="capture.json: Expecting value"):
        precfuzz.judge_capture(tmp_path / "d")
    with pytest.raises(ValueError, match="No such file"):
        precfuzz.judge_capture(tmp_path / "nowhere")


def test_nothing_stays_patched(tmp_path):
    before = F.cross_entropy, F.scaled_dot_product_attention, F.rms_norm
    step(tmp_path / "cap")
    assert (F.cross_entropy, F.scaled_dot_product_attention, F.rms_norm) == before


def test_layer_norm_backward_is_recorded_and_judged(tmp_path):
    """LayerNorm's backward under loss.backward(): recorded with its forward's eps and the thread
    count (PyTorch's per-thread buffers), judged bit for bit by layernorm_bwd/torch: ok; with bf16
    activations and fp32 weights over 4096 tokens of dy = 1, dbeta stops at 256 (saturated);
    a backward whose forward ran outside the capture is skipped (its eps is unknown)."""
    torch.manual_seed(0)
    torch.set_num_threads(2)
    ln = torch.nn.LayerNorm(48, eps=1e-6)  # fp32 weights beside bf16 activations
    with torch.no_grad():
        ln.weight.normal_(1, 0.1)
    x = (torch.randn(4096, 48) + 2).to(torch.bfloat16).requires_grad_()
    outside = ln(x)
    with precfuzz.capture(tmp_path / "cap", ops=("layernorm", "layernorm_bwd")) as cap:
        y = ln(x)
        y.backward(torch.ones_like(y))
        outside.backward(torch.ones_like(outside))  # forward not seen: skipped
    assert [(r["op"], r["dtype"], r["params"].get("weights")) for r in cap.records] == [
        ("layernorm", "bf16", "fp32"), ("layernorm_bwd", "bf16", "fp32")]
    p = cap.records[1]["params"]
    assert p["eps"] == float(np.float32(1e-6)) and p["blocks"] == 2
    assert [op for op, _ in cap.skipped] == ["layernorm_bwd"] and "eps unknown" in cap.skipped[0][1]
    js = cap.judge()
    assert [j.verdict for j in js] == ["ok", "ok"], "\n".join(str(j) for j in js)
    assert "saturated" in [h.kind for h in js[1].hazards], str(js[1])


def test_norms_are_recorded_and_judged(tmp_path):
    """nn.LayerNorm (bf16, and bf16 activations with fp32 weights as Megatron keeps them) and
    nn.RMSNorm, judged by layernorm/torch and rmsnorm/torch; a LayerNorm without weights is
    skipped (PyTorch takes another loop); a y moved by a few ulps is a finding."""
    torch.manual_seed(0)
    ln = torch.nn.LayerNorm(64).to(torch.bfloat16)
    ln32 = torch.nn.LayerNorm(64)  # fp32 weights
    rms = torch.nn.RMSNorm(64, eps=1e-6).to(torch.bfloat16)
    with torch.no_grad():
        for m in (ln, ln32, rms):
            m.weight.normal_(1, 0.1)
        ln.bias.normal_(0, 0.1)
    x = torch.randn(3, 5, 64, dtype=torch.bfloat16) + 4
    with precfuzz.capture(tmp_path / "cap") as cap:
        ln(x)
        F.layer_norm(x, [64], ln32.weight, ln32.bias, 1e-5)
        rms(x)
        F.rms_norm(x.float(), [64])  # eps=None: fp32's epsilon
        F.layer_norm(x, [64])  # no weight: skipped
    assert [(r["op"], r["dtype"], r["params"].get("weights")) for r in cap.records] == [
        ("layernorm", "bf16", "storage"), ("layernorm", "bf16", "fp32"), ("rmsnorm", "bf16", "storage"),
        ("rmsnorm", "fp32", "storage")]
    assert cap.records[0]["shape"] == [15, 64] and cap.records[2]["params"]["eps"] == float(np.float32(1e-6))
    assert cap.records[3]["params"]["eps"] == 2.0 ** -23
    assert [op for op, _ in cap.skipped] == ["layernorm"] and "no weight" in cap.skipped[0][1]
    js = cap.judge()
    assert [j.verdict for j in js] == ["ok"] * 4, "\n".join(str(j) for j in js)
    assert js[0].judged == 15 + 15 + 15 * 64  # mean, rstd, y
    # y[2, 7] four bf16 ulps further from zero, in the safetensors file (header length, header, data)
    out = cap.records[0]["outputs"]
    raw = bytearray(open(out, "rb").read())
    n = int.from_bytes(raw[:8], "little")
    start = 8 + n + json.loads(raw[8:8 + n])["y"]["data_offsets"][0] + 2 * (2 * 64 + 7)
    v = int.from_bytes(raw[start:start + 2], "little") + 4
    raw[start:start + 2] = v.to_bytes(2, "little")
    open(out, "wb").write(bytes(raw))
    j = precfuzz.judge_capture(tmp_path / "cap")[0]
    assert j.verdict == "inaccurate" and "born in y at y[135]" in j.detail, str(j)  # 2 64 + 7
