"""Cross-process negatives: 2 CPU processes (gloo, DDP) with half the batch each == 1 process on all of it
(Matryoshka objectives too: the gather at each width).

The relation tested, with dropout off (eval mode) and the same initial weights:

- loss: every process reports the loss of the *global* batch (anchors and candidates all-gathered), so
  each process's loss equals the 1-process loss on the concatenated batch;
- gradients: each process back-propagates only through its own slice (SimCSE's gather); the objectives
  scale that gradient by the world size W, so after DDP's all-reduce *average* the gradient of every
  parameter equals the 1-process gradient on the concatenated batch (without the scaling it would be
  1/W of it).

Both to 1e-5 (the computation runs in float64, so a real mismatch cannot hide in float32 noise).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import protoembed
from protoembed.objectives import build_objective, gather_with_grad

SENTENCES = [
    "a man is playing a guitar .",
    "the cat sat on the mat and looked out of the window .",
    "two dogs are running through a field of grass .",
    "stocks fell sharply after the report on monday .",
    "a woman is slicing an onion .",
    "the quick brown fox jumps over the lazy dog .",
]
CASES = {
    "conpvp": ("soft_prompt", {"templates": "<one-pair>"}),
    "conpvp_denoise": ("soft_prompt", {"templates": "<one-pair>", "denoise": "attention_mask"}),
    "simcse": ("cls", {}),
    "promptbert": ("mask", {"denoise": True}),
    # Matryoshka: each width's loss over the batch gathered from every process
    "simcse_mrl": ("cls", {"matryoshka": {"dims": [32, 16, 4], "weights": [1.0, 0.5, 2.0]}}),
    "conpvp_mrl": ("soft_prompt", {"templates": "<one-pair>", "matryoshka": {"dims": [32, 8]}}),
}


def _objective(model_dir: str, case: str, templates: str):
    head, options = CASES[case]
    options = {k: (templates if v == "<one-pair>" else v) for k, v in options.items()}
    torch.manual_seed(0)  # same soft prompt and MLP in every process (DDP also broadcasts rank 0's)
    embedder = protoembed.load(model_dir, head=head)
    name = case.split("_")[0]
    return build_objective(name, embedder, **options).double().eval()  # eval: dropout off


def _worker(rank: int, world: int, port: int, model_dir: str, templates: str, out: str) -> None:
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        n = len(SENTENCES) // world
        for case in CASES:
            objective = _objective(model_dir, case, templates)
            ddp = torch.nn.parallel.DistributedDataParallel(objective, find_unused_parameters=True)
            loss = ddp(SENTENCES[rank * n : (rank + 1) * n])
            loss.backward()
            grads = {k: p.grad.clone() for k, p in objective.named_parameters() if p.grad is not None}
            torch.save({"loss": loss.item(), "grads": grads}, Path(out) / f"{case}-{rank}.pt")
            del ddp, objective, loss  # free DDP's reducer while its process group lives (else exit can hang)
            dist.barrier()  # no rank tears down a reducer the other is still reducing with
        # unequal slices (a short last batch): rank r holds r + 1 rows
        x = torch.full((rank + 1, 2), float(rank), requires_grad=True)
        gathered = gather_with_grad(x)
        (gathered * 3).sum().backward()
        torch.save({"gathered": gathered.detach(), "grad": x.grad}, Path(out) / f"gather-{rank}.pt")
        dist.barrier()  # both ranks done before either closes gloo's pairs (else one can abort at exit)
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_processes_equal_one_process_on_the_concatenated_batch(tiny_model_dirs, tmp_path: Path) -> None:
    model_dir = str(tiny_model_dirs["bert"])
    templates = tmp_path / "one-pair.txt"
    templates.write_text(
        '[positive]\nBy "<S>" they mean [MASK] .\n[negative]\n"<S>" is not a [MASK] one\n', encoding="utf-8"
    )
    world = 2
    mp.spawn(_worker, args=(world, _free_port(), model_dir, str(templates), str(tmp_path)), nprocs=world)

    for case in CASES:
        objective = _objective(model_dir, case, str(templates))
        reference = objective(SENTENCES)
        reference.backward()
        expected = {k: p.grad for k, p in objective.named_parameters() if p.grad is not None}
        assert expected, case
        for rank in range(world):
            result = torch.load(tmp_path / f"{case}-{rank}.pt")
            assert abs(result["loss"] - reference.item()) < 1e-5, (case, rank)
            assert result["grads"].keys() == expected.keys(), (case, rank)
            for key, grad in expected.items():
                torch.testing.assert_close(
                    result["grads"][key], grad, rtol=1e-5, atol=1e-5, msg=f"{case} {key}"
                )

    for rank in range(world):
        result = torch.load(tmp_path / f"gather-{rank}.pt")
        torch.testing.assert_close(result["gathered"], torch.tensor([[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]))
        torch.testing.assert_close(result["grad"], torch.full((rank + 1, 2), 3.0))  # local slice only


# ------------------------------------------------------------------ GradCache with two processes
#: cases whose views are the same in 1 and 2 processes (no per-rank template draws)
DROPOUT_OFF_CASES = ("conpvp_denoise", "promptbert", "simcse", "simcse_sup")


class _ChunkedUncached(torch.nn.Module):
    """The uncached step on the cached step's chunks (see grad_cache_cases), as one DDP forward."""

    def __init__(self, objective) -> None:
        super().__init__()
        self.objective = objective

    def forward(self, views):
        from grad_cache_cases import chunked_uncached_loss

        return chunked_uncached_loss(self.objective, views)


def _cached_worker(rank: int, world: int, port: int, model_dir: str, templates: str, out: str) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from grad_cache_cases import CASES as CACHED
    from grad_cache_cases import MINI_BATCH, batch_for, build, gradients, twin
    from protoembed.objectives.cache import grad_cache_step
    from protoembed.objectives.distributed import average_gradients

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        for case in CACHED:
            reference = build(model_dir, case, templates)  # dropout on, float32
            cached = twin(reference)
            views = reference.collate(batch_for(case, rank, world))
            ddp = torch.nn.parallel.DistributedDataParallel(
                _ChunkedUncached(reference), find_unused_parameters=True
            )
            torch.manual_seed(100 + rank)
            loss = ddp(views)
            loss.backward()  # DDP averages
            torch.manual_seed(100 + rank)
            cached_loss = grad_cache_step(cached, views, MINI_BATCH)
            average_gradients(cached.parameters())
            result = {
                "loss": loss.item(),
                "grads": gradients(reference),
                "cached_loss": cached_loss.item(),
                "cached_grads": gradients(cached),
            }
            if case in DROPOUT_OFF_CASES:  # against ONE process on the concatenated batch
                plain = build(model_dir, case, templates).double().eval()
                off_loss = grad_cache_step(plain, batch_for(case, rank, world), MINI_BATCH)
                average_gradients(plain.parameters())
                result.update(off_loss=off_loss.item(), off_grads=gradients(plain))
            torch.save(result, Path(out) / f"cached-{case}-{rank}.pt")
            del ddp, reference, cached, loss
            dist.barrier()
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_cached_step_with_two_processes(tiny_model_dirs, tmp_path: Path) -> None:
    """Each process: the GradCache step + its own gradient average == the uncached step through DDP on
    the same chunks and random state (dropout on, float32, to 1e-5); with dropout off (float64) the two
    processes' cached step == one process's plain step on the concatenated batch."""
    from grad_cache_cases import CASES as CACHED
    from grad_cache_cases import ONE_PAIR, batch_for, build, gradients, max_relative_difference

    model_dir = str(tiny_model_dirs["bert"])
    templates = tmp_path / "one-pair.txt"
    templates.write_text(ONE_PAIR, encoding="utf-8")
    world = 2
    mp.spawn(
        _cached_worker, args=(world, _free_port(), model_dir, str(templates), str(tmp_path)), nprocs=world
    )
    worst = {}
    for case in CACHED:
        for rank in range(world):
            result = torch.load(tmp_path / f"cached-{case}-{rank}.pt")
            assert abs(result["cached_loss"] - result["loss"]) <= 1e-5 * abs(result["loss"]), (case, rank)
            worst[case] = max_relative_difference(result["cached_grads"], result["grads"])
            assert worst[case] < 1e-5, (case, rank, worst[case])
        if case in DROPOUT_OFF_CASES:
            plain = build(model_dir, case, str(templates)).double().eval()
            reference = plain(batch_for(case))
            reference.backward()
            expected = gradients(plain)
            for rank in range(world):
                result = torch.load(tmp_path / f"cached-{case}-{rank}.pt")
                assert abs(result["off_loss"] - reference.item()) <= 1e-5 * abs(reference.item()), case
                assert max_relative_difference(result["off_grads"], expected) < 1e-5, (case, rank)


def _throughput_worker(rank: int, world: int, port: int, out: str) -> None:
    """Rank r counted ``TOKENS[r]`` tokens in 2 s on a device of peak 1e12 FLOP/s: the trainer's reading of
    the tokens over the processes and its throughput, saved per rank."""
    from types import SimpleNamespace

    from accelerate import Accelerator

    from protoembed.training.trainer import Trainer

    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    torch.set_num_threads(1)
    accelerator = Accelerator(cpu=True)
    try:
        counter = SimpleNamespace(take=lambda: THROUGHPUT_TOKENS[rank])
        trainer = SimpleNamespace(tokens=counter, accelerator=accelerator, flop_params=1_000_000, peak=1e12)
        tokens = Trainer._read_tokens(trainer)
        torch.save(
            {"tokens": tokens, **Trainer._throughput(trainer, tokens, 2.0)}, Path(out) / f"rate-{rank}.pt"
        )
        accelerator.wait_for_everyone()
    finally:
        dist.destroy_process_group()


#: The tokens each of two processes counted (unequal: the MFU is their devices' mean).
THROUGHPUT_TOKENS = (30_000, 50_000)


def test_mfu_with_two_processes_is_per_device(tmp_path: Path) -> None:
    """2 gloo processes: the run's tokens/s is both processes' together, its MFU the mean of the two
    devices' own ``6 x N x tokens/s / peak`` (not their sum)."""
    world = 2
    mp.spawn(_throughput_worker, args=(world, _free_port(), str(tmp_path)), nprocs=world)
    own = [6 * 1_000_000 * (tokens / 2.0) / 1e12 for tokens in THROUGHPUT_TOKENS]  # each device's MFU
    for rank in range(world):
        rate = torch.load(tmp_path / f"rate-{rank}.pt")
        assert rate["tokens"] == sum(THROUGHPUT_TOKENS)
        assert rate["tokens_per_second"] == sum(THROUGHPUT_TOKENS) / 2.0
        assert rate["mfu"] == round(sum(own) / world, 5) == 0.12
