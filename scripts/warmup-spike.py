#!/usr/bin/env python3
"""Seed 001 (loss spikes at the end of learning-rate warm-up, cured by beta2 0.95): a gradient
spike x100 at the last warm-up step, in the exact trajectory and in two precision
configurations, for beta2 0.999 and 0.95. Prints, per configuration and seed, the largest
one-step move of a parameter at the spike in units of the peak learning rate, beside the
move a spike that dominates m and v gives: lr (1 - beta1) / bc1 / sqrt((1 - beta2) / bc2).

usage: scripts/warmup-spike.py PRECFUZZ"""
import json
import subprocess
import sys

T, N, W, LR = 160, 8, 100, 1e-3


def trajectory(precfuzz, variant, b2, seed, mag):
    cmd = [precfuzz, 'run', '-k', 'schedule', '-v', variant, '-t', 'bf16', '--shape', f'{T}x{N}', '--seed', str(seed),
           '--cases', '1', '--json', '--param', f'beta2={b2}', '--param', f'warmup={W}', '--param', f'lr={LR}',
           '--param', f'spike_step={W}', '--param', f'spike_mag={mag}', '--input', 'noise:scale=0.01',
           '--input', 'curv:scale=0.01']
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode not in (0, 1):
        sys.exit('warmup-spike: precfuzz failed: ' + res.stderr.strip())
    el = json.loads(res.stdout)['cases'][0]['elements']
    master = 2 * T + T * N  # the output layout of kernels/schedule/schedule_spec.h
    run = [[float.fromhex(el[master + t * N + i]['y']) for i in range(N)] for t in range(T)]
    exact = [[float.fromhex(el[master + t * N + i]['exact']) for i in range(N)] for t in range(T)]
    return run, exact


def jump(p):
    return max(abs(p[W - 1][i] - p[W - 2][i]) for i in range(N)) / LR  # the spike step (index W - 1)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    precfuzz = sys.argv[1]
    print('%-6s %-8s %-26s %s' % ('beta2', 'theory', 'configuration', 'step at the spike / lr, seeds 1 2 3'))
    for b2 in (0.999, 0.95):
        theory = (1 - 0.9) / (1 - 0.9 ** W) / ((1 - b2) / (1 - b2 ** W)) ** 0.5
        rows = {'exact': [], 'bf16 params, fp32 master': [], 'bf16 params and state': []}
        for seed in (1, 2, 3):
            for variant, name in (('fp32-state', 'bf16 params, fp32 master'), ('lowp-state', 'bf16 params and state')):
                run, exact = trajectory(precfuzz, variant, b2, seed, 100)
                if variant == 'fp32-state':
                    rows['exact'].append(jump(exact))
                rows[name].append(jump(run))
        for name, vals in rows.items():
            print('%-6s %-8.3f %-26s %s' % (b2, theory, name, ' '.join('%.2f' % v for v in vals)))


main()
