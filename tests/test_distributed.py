"""Cross-process negatives: 2 CPU processes (gloo, DDP) with half the batch each == 1 process on all of it.

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
        # unequal slices (a short last batch): rank r holds r + 1 rows
        x = torch.full((rank + 1, 2), float(rank), requires_grad=True)
        gathered = gather_with_grad(x)
        (gathered * 3).sum().backward()
        torch.save({"gathered": gathered.detach(), "grad": x.grad}, Path(out) / f"gather-{rank}.pt")
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
