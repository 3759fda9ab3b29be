"""precfuzz.judge on values whose exact answer is known by hand."""

import json
import os

import numpy as np
import pytest

import precfuzz

ULP_HALF_FP16 = 2.0**-11  # fp16's spacing just above 0.5


def test_exact_outputs_are_ok_and_leave_nothing(tmp_path):
    x = np.zeros((2, 4), np.float16)  # softmax of equal values: 1/4 exactly
    j = precfuzz.judge("softmax", {"x": x}, np.full((2, 4), 0.25, np.float16), findings=tmp_path)
    assert j.ok and j.verdict == "ok" and j.max_ulps == 0 and j.counts["ok"] == 8
    assert j.replay is None and not os.listdir(tmp_path)


def test_two_ulps_off_is_inaccurate_with_a_replay_line(tmp_path):
    x = np.zeros((1, 2), np.float16)  # exactly [0.5, 0.5]
    y = np.array([[0.5, 0.5 + 2 * ULP_HALF_FP16]], np.float16)
    j = precfuzz.judge("softmax", {"x": x}, y, findings=tmp_path)
    assert j.finding and j.verdict == "inaccurate" and j.max_ulps == 2 and j.counts["inaccurate"] == 1
    assert "[0,1]" in j.detail
    # one ulp is what the default --ulps 1 allows
    y1 = np.array([[0.5, 0.5 + ULP_HALF_FP16]], np.float16)
    assert precfuzz.judge("softmax", {"x": x}, y1, findings=tmp_path).ok
    assert not precfuzz.judge("softmax", {"x": x}, y1, ulps=0, findings=tmp_path).ok
    # the replay line judges the kept files again, from any directory
    case = json.load(open(j.case_file))
    assert case["kernel"] == "softmax" and os.path.isabs(case["inputs"]["x"]["file"])
    import shlex, subprocess
    r = subprocess.run(shlex.split(j.replay), cwd="/", capture_output=True, text=True)
    assert r.returncode == 1 and "inaccurate" in r.stdout, r.stdout + r.stderr


def test_the_bound_is_ulps_or_a_named_contract(tmp_path):
    x = np.zeros((1, 4), np.float16)  # exactly 1/4 each
    y = np.array([[0.25, 0.25, 0.25, 0.25 + 2 * 2.0**-12]], np.float16)  # 2 ulps above 1/4
    assert precfuzz.judge("softmax", {"x": x}, y, ulps=2, findings=tmp_path).ok
    j = precfuzz.judge("softmax", {"x": x}, y, findings=tmp_path)
    assert not j.ok and [e["allowed"] for e in j.elements] == [1, 1, 1, 1]
    # softmax/safe accumulating in fp16 allows more than 1 ulp: the 2-ulp output keeps its
    # contract; accumulating in fp32 its bound is below 1 ulp here (every value exact): not
    j = precfuzz.judge("softmax", {"x": x}, y, like="safe", accum="fp16", findings=tmp_path)
    assert j.ok and j.variant == "safe" and j.max_ulps == 2 and j.elements[3]["allowed"] > 2, str(j)
    j = precfuzz.judge("softmax", {"x": x}, y, like="safe", findings=tmp_path)
    assert not j.ok and j.elements[3]["allowed"] < 2


def test_torch_bf16_tensors(tmp_path):
    torch = pytest.importorskip("torch")
    x = torch.zeros(3, 8, dtype=torch.bfloat16)
    j = precfuzz.judge("softmax", {"x": x}, torch.softmax(x, -1), findings=tmp_path)
    assert j.ok and j.counts["ok"] == 24  # 1/8 exactly
    bad = torch.full((3, 8), 0.125, dtype=torch.bfloat16)
    bad[2, 7] = 0.125 + 2 * 2.0**-10  # bf16's spacing above 0.125 is 2^-3 * 2^-7: 2 ulps
    j = precfuzz.judge("softmax", {"x": x}, bad, findings=tmp_path)
    assert j.verdict == "inaccurate" and j.max_ulps == 2 and "[2,7]" in j.detail


def test_several_stages_go_as_safetensors(tmp_path):
    # Adam (fused: fp32 master) with g = m = v = 0 and no decay: the update is 0, so m and v stay
    # 0 and the master and the parameter stay p
    p = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    z = np.zeros(4, np.float32)
    ins = {"p": p, "g": z, "m": z, "v": z}
    params = {"lr": 1e-3, "wd": 0.0, "eps": 1e-8, "step": 1}
    j = precfuzz.judge("adam", ins, {"m": z, "v": z, "master": p, "param": p}, params=params, findings=tmp_path)
    assert j.ok and j.counts["ok"] == 16, str(j)
    j = precfuzz.judge("adam", ins, {"m": z, "v": z, "master": p, "param": p * 2}, params=params, findings=tmp_path)
    assert j.finding and j.counts["ok"] == 12 and j.outputs_file.endswith(".safetensors")
    # a tensor not named as a stage is refused, not left unjudged
    with pytest.raises(precfuzz.PrecfuzzError, match="tensor 'p' is no output of adam \\(m, v, master, param\\)"):
        precfuzz.judge("adam", ins, {"p": p, "m": z, "v": z}, params=params, findings=tmp_path)
    with pytest.raises(precfuzz.PrecfuzzError, match="tensor 'params' is no output of adam \\(m, v, master, param\\)"):
        precfuzz.judge("adam", ins, {"params": p, "m": z, "v": z}, params=params, findings=tmp_path)


def test_bad_input_is_named(tmp_path):
    x = np.zeros((1, 2), np.float16)
    with pytest.raises(TypeError, match="float64"):
        precfuzz.judge("softmax", {"x": x}, np.zeros((1, 2)), findings=tmp_path)
    with pytest.raises(ValueError, match="at least one"):
        precfuzz.judge("softmax", {}, x, findings=tmp_path)
    with pytest.raises(precfuzz.PrecfuzzError, match="precfuzz judge: "):
        precfuzz.judge("softmax", {"x": x}, np.zeros((1, 3), np.float16), findings=tmp_path)


def test_one_stage_of_several_with_integer_targets(tmp_path):
    # uniform logits: every row's loss is ln 4, and so is their mean; class indices as int64
    x = np.zeros((2, 4), np.float32)
    t = np.array([1, 3])
    ln4 = np.float32(np.log(4.0))  # ln 4 rounded once to fp32: the correctly rounded value
    j = precfuzz.judge("cross_entropy", {"logits": x, "target": t}, {"reduced": np.array([ln4])},
                       params={"reduction": "mean"}, findings=tmp_path)
    assert j.ok and j.counts["ok"] == 1 and j.judged == 1, str(j)  # loss and dlogits not given
    off = np.nextafter(np.nextafter(ln4, np.float32(2)), np.float32(2))
    j = precfuzz.judge("cross_entropy", {"logits": x, "target": t}, {"reduced": np.array([off])},
                       params={"reduction": "mean"}, findings=tmp_path)
    assert j.verdict == "inaccurate" and j.max_ulps == 2 and "reduced[0]" in j.detail
    with pytest.raises(ValueError, match="input target: integers beyond fp32's exact range"):
        precfuzz.judge("cross_entropy", {"logits": x, "target": np.array([2**24 + 1, 0])}, {"reduced": np.array([ln4])},
                       findings=tmp_path)


def test_an_outputs_file_of_more_than_64_tensors_is_refused(tmp_path):
    # every tensor's name is checked against the stages, so a file of more than that many is
    # refused whole rather than judged in part
    import subprocess

    from precfuzz.judging import safetensors_bytes
    from precfuzz.protocol import npy_bytes

    x = np.zeros((1, 2), np.float16)
    (tmp_path / "x.npy").write_bytes(npy_bytes(x))
    many = {"output": np.full((1, 2), 0.5, np.float16), **{f"t{i}": x for i in range(64)}}
    (tmp_path / "o.safetensors").write_bytes(safetensors_bytes(many))
    p = subprocess.run([precfuzz.binary(), "judge", "-k", "softmax", "-t", "fp16", "--input", f"x:file={tmp_path}/x.npy",
                        "--outputs", f"{tmp_path}/o.safetensors"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.strip().endswith("65 tensors; an outputs file holds at most 64"), p.stderr
