"""bf16 against fp32: the loss of one batch for every objective, on the CPU study's configs.

For each config (default: the CPU study's ConPVP, SimCSE, PromptBERT, supervised SimCSE, SBERT on STS-B
and on NLI, and the cross-encoder on STS-B and on NLI), the run's model is built as the trainer builds it
(the default backbone, the config's head, objective and training truncation) and the first
``--batch-size`` examples of the run's data (read and matched to the objective's columns) go through the
objective twice with the same weights (ConPVP's template draws replayed): in fp32, then under bf16
autocast, which is what ``training.precision: bf16`` applies to the objective's forward (the
similarities, temperature scaling, log-softmax and losses stay fp32 there); once in training mode
(dropout on, the same masks in both passes: the same seed) and once with dropout off. Printed: the
losses and their relative differences; the bound we hold them to is 1%.

Run from the repository root: ``PROTOEMBED_DATA=/path/to/data python experiments/precision_check.py
[--batch-size 32] [CONFIG ...]``.
"""

from __future__ import annotations

import argparse

if __package__ in (None, ""):  # run as a script: python experiments/precision_check.py
    import script_path  # noqa: F401  (puts the repository root on sys.path)

CONFIGS = tuple(
    f"configs/cpu/{name}.yaml"
    for name in (
        "conpvp-paper",
        "conpvp-official",
        "simcse",
        "promptbert",
        "simcse-sup-nli",
        "sbert-stsb",
        "sbert-nli",
        "cross-encoder-stsb",
        "cross-encoder-nli",
    )
)


def losses(config: str, batch_size: int, dropout: bool) -> tuple[float, float]:
    """``(fp32 loss, bf16 loss)`` of the first ``batch_size`` examples of ``config``'s run, with or
    without dropout."""
    import torch

    from protoembed import load_run
    from protoembed.training.components import (
        build_objective_from_config,
        embedder_for,
        examples_for,
        read_training_examples,
    )

    ((_, cfg),) = load_run(config)  # a single run: one entry
    columns = cfg.objective.plan.columns  # planned when the config was read
    examples = examples_for(read_training_examples(cfg), columns, cfg)
    batch = examples.select(range(min(batch_size, len(examples))))
    torch.manual_seed(cfg.training.seed)
    embedder = embedder_for(cfg, "cpu")
    objective = build_objective_from_config(cfg, embedder).train(dropout)
    draws = None
    if hasattr(objective, "generator"):  # ConPVP: replay the template draws in the second pass
        _ = objective.generator
        draws = objective.get_extra_state()
    with torch.no_grad():
        torch.manual_seed(0)
        fp32 = float(objective(batch))
        if draws is not None:
            objective.set_extra_state(draws)
        torch.manual_seed(0)  # the same dropout masks
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16 = float(objective(batch))
    return fp32, bf16


def main(argv: list[str] | None = None) -> None:
    """Print one line per config and the largest relative difference."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", default=list(CONFIGS))
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args(argv)
    worst = {True: 0.0, False: 0.0}
    for config in args.configs:
        line = []
        for dropout in (True, False):
            fp32, bf16 = losses(config, args.batch_size, dropout)
            rel = abs(bf16 - fp32) / abs(fp32)
            worst[dropout] = max(worst[dropout], rel)
            line.append(
                f"dropout {'on' if dropout else 'off'}: fp32={fp32:.6f} bf16={bf16:.6f} rel_diff={rel:.2e}"
            )
        print(f"{config}: {'; '.join(line)}")
    print(f"max_rel_diff dropout on={worst[True]:.2e} off={worst[False]:.2e}")


if __name__ == "__main__":
    main()
