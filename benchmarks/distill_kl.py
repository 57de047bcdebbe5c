"""The soft-target KL of distillation: our chunked loss-and-gradient against the plain autograd
formulation (log_softmax + kl_div), forward + backward, interleaved in one process.

python benchmarks/distill_kl.py                 # the default decoder's shape: 32 x 128 positions, vocab 8192
python benchmarks/distill_kl.py --rows 614      # the encoder's: ~15% of 32 x 128 positions are masked

Prints the median milliseconds of each and the ratio; both must give the same loss and gradient.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from lmforge.distill.objective import soft_target_kl


def reference(student: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    log_s = F.log_softmax(student / temperature, dim=-1)
    log_t = F.log_softmax(teacher / temperature, dim=-1)
    kl = F.kl_div(log_s, log_t, log_target=True, reduction="sum")
    return kl / len(student) * temperature**2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=32 * 128)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--temperature", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    g = torch.Generator().manual_seed(0)
    student = torch.randn(args.rows, args.vocab, generator=g).requires_grad_(True)
    teacher = torch.randn(args.rows, args.vocab, generator=g)
    ways = {"log_softmax + kl_div": reference, "chunked (ours)": soft_target_kl}
    times: dict[str, list[float]] = {name: [] for name in ways}
    results = {}
    for i in range(args.repeats + 1):
        for name, loss_fn in ways.items():
            start = time.perf_counter()
            loss = loss_fn(student, teacher, args.temperature)
            loss.backward()
            if i:  # the first round warms up
                times[name].append(1e3 * (time.perf_counter() - start))
            results[name] = (loss.detach(), student.grad.clone())
            student.grad = None
    (loss_a, grad_a), (loss_b, grad_b) = results.values()
    torch.testing.assert_close(loss_b, loss_a, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad_b, grad_a, rtol=1e-4, atol=1e-9)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"soft-target KL, {args.rows} x {args.vocab}, forward + backward, {torch.get_num_threads()} threads"
    )
    for name, ms in medians.items():
        print(f"  {name:22s} {ms:8.1f} ms")
    base, ours = medians.values()
    print(f"  speed-up {base / ours:.2f}x (same loss and gradient)")


if __name__ == "__main__":
    main()
