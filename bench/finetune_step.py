"""PyTorch's time for one training step of the Kronos predictor (or tokenizer), the baseline of
bench/results/finetune-*.md: the same model as kronos's C core (bench/torch_kronos.py, checked
against ../shared/golden/train first), the same step as the official finetune loop:
forward in train mode (s2 conditioned on s1 sampled from the detached s1 distribution, the
dependency layer causal), backward, clip_grad_norm_, AdamW, OneCycleLR.

    /usr/bin/python3 bench/finetune_step.py --shape small --batch 32 --seq 512 --threads 2

Prints one JSON line: median and mean step seconds over --steps timed steps (after --warmup),
the median CPU seconds a step took over all threads (process_time: what a loaded machine does
not inflate), tokens per second, and the process's peak resident memory (ru_maxrss). Run each shape in its
own process so the peak is that shape's. Uses Debian's python3-torch; its BLAS is whatever
libblas.so.3 points to (update-alternatives --display libblas.so.3-x86_64-linux-gnu): OpenBLAS,
never the reference BLAS, for these figures.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_kronos  # noqa: E402

# The public checkpoints' shapes (DESIGN.md); dropout 0 on both sides of the comparison.
SHAPES = {
    "mini": dict(s1_bits=10, s2_bits=10, n_layers=4, d_model=256, n_heads=4, ff_dim=512,
                 learn_te=True),
    "small": dict(s1_bits=10, s2_bits=10, n_layers=8, d_model=512, n_heads=8, ff_dim=1024,
                  learn_te=True),
    "tokenizer-base": dict(d_in=6, d_model=256, n_heads=4, ff_dim=512, n_enc_layers=4,
                           n_dec_layers=4, s1_bits=10, s2_bits=10, beta=0.05, gamma0=1.0,
                           gamma=1.1, zeta=0.05, group_size=4),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=sorted(SHAPES), default="small")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=512, help="positions trained per window")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--no-golden", action="store_true",
                    help="skip the golden check (the harness ran it once already)")
    ap.add_argument("--golden", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "..", "..", "shared", "golden", "train"))
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    # Same loss and gradients as the reference, or no figures.
    golden = [] if args.no_golden else torch_kronos.check_golden(args.golden)
    torch.set_num_threads(args.threads)

    cfg = SHAPES[args.shape]
    kind = "tokenizer" if args.shape.startswith("tokenizer") else "predictor"
    model = torch_kronos.fresh(kind, cfg, seed=1)
    model.train()
    g = torch.Generator().manual_seed(2)
    B, T = args.batch, args.seq
    if kind == "predictor":
        ids1 = torch.randint(0, 1024, (B, T + 1), generator=g)
        ids2 = torch.randint(0, 1024, (B, T + 1), generator=g)
        stamp = torch.stack([torch.randint(0, n, (B, T + 1), generator=g)
                             for n in (60, 24, 7, 32, 13)], -1)
        betas, clip, lr = (0.9, 0.95), 3.0, 4e-5
    else:
        x = torch.randn(B, T, 6, generator=g).clamp(-5, 5)
        betas, clip, lr = (0.9, 0.999), 2.0, 2e-4
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=0.1)
    total = args.warmup + args.steps
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=total,
                                                pct_start=0.03, div_factor=10)

    def step():
        opt.zero_grad()
        if kind == "predictor":
            # The official step: the s1 logits' distribution sampled (no gradient), then the
            # s2 head conditioned on those ids; one forward of the transformer.
            l1, l2 = model.forward_sampled(ids1[:, :-1], ids2[:, :-1], stamp[:, :-1])
            ce1 = torch.nn.functional.cross_entropy(l1.reshape(-1, 1024), ids1[:, 1:].reshape(-1))
            ce2 = torch.nn.functional.cross_entropy(l2.reshape(-1, 1024), ids2[:, 1:].reshape(-1))
            loss = (ce1 + ce2) / 2
        else:
            loss, _ = model.losses(x)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        sched.step()
        return loss.item()

    times, cpu = [], []
    for i in range(total):
        t0, c0 = time.perf_counter(), time.process_time()
        loss = step()
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        if i >= args.warmup:
            times.append(dt)
            cpu.append(dc)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    positions = B * T
    print(json.dumps({
        "impl": "pytorch", "torch": torch.__version__, "shape": args.shape, "batch": B,
        "seq": T, "threads": args.threads, "steps": args.steps,
        "median_s": statistics.median(times), "mean_s": statistics.mean(times),
        "cpu_s_per_step": statistics.median(cpu),
        "tokens_per_s": positions / statistics.median(times), "last_loss": loss,
        "peak_rss_mb": peak_kb / 1024.0, "golden": golden,
    }))


if __name__ == "__main__":
    main()
