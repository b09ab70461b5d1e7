"""How often the staged training data repeats a text, and what ``batch_sampler: no_duplicates`` makes of it.

For each config (default: the unsupervised CPU study's wiki sample, ``configs/cpu/simcse.yaml``, and the
staged NLI pairs as supervised SimCSE reads them, ``configs/cpu/simcse-sup-nli.yaml``, and as SBERT reads
them, ``configs/cpu/sbert-nli.yaml``): the examples the run trains on (read and converted to the
objective's columns, as the trainer does), their duplicate counts
(:func:`protoembed.training.samplers.duplicate_counts`) and the full batches of epoch 1 with
``no_duplicates`` against ``shuffle`` at the config's batch size. A repeated text inside a batch is a false
negative of the in-batch contrastive losses (SimCSE Eq. 4, ConPVP Eq. 1).

Run from the repository root: ``PROTOEMBED_DATA=/path/to/data python experiments/duplicates.py
[CONFIG ...]``.
"""

from __future__ import annotations

import argparse

if __package__ in (None, ""):  # run as a script: python experiments/duplicates.py
    import script_path  # noqa: F401  (puts the repository root on sys.path)

CONFIGS = ("configs/cpu/simcse.yaml", "configs/cpu/simcse-sup-nli.yaml", "configs/cpu/sbert-nli.yaml")


def report(config: str) -> str:
    """One line: the config's data, its duplicate counts and the batches of both samplers."""
    from protoembed import load_run
    from protoembed.training.components import examples_for, read_training_examples
    from protoembed.training.samplers import NoDuplicatesSampler, duplicate_counts

    ((_, cfg),) = load_run(config)  # a single run: one entry
    columns = cfg.objective.plan.columns  # planned when the config was read
    examples = examples_for(read_training_examples(cfg), columns, cfg)
    counts = duplicate_counts(examples)
    batch = cfg.training.batch_size
    full = NoDuplicatesSampler(examples, batch, cfg.training.seed).num_batches(0)
    shown = " ".join(f"{k}={v}" for k, v in counts.items())
    return (
        f"{config}: columns={','.join(examples.names)} {shown} batch={batch} "
        f"batches_no_duplicates={full} batches_shuffle={len(examples) // batch} "
        f"shuffle_batches_with_a_shared_text={clashing_batches(examples, batch, cfg.training.seed)}"
    )


def clashing_batches(examples, batch_size: int, seed: int) -> int:
    """Batches of epoch 1 of ``shuffle`` in which two examples share a text."""
    from protoembed.training.components import EpochShuffleSampler
    from protoembed.training.samplers import text_ids

    ids, _ = text_ids(examples)
    order = list(EpochShuffleSampler(len(examples), seed))
    clashes = 0
    for start in range(0, len(order) - batch_size + 1, batch_size):
        rows = [set(ids[i]) for i in order[start : start + batch_size]]
        clashes += len(set().union(*rows)) < sum(len(r) for r in rows)
    return clashes


def main(argv: list[str] | None = None) -> None:
    """Print :func:`report` for every config."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", default=list(CONFIGS))
    for config in parser.parse_args(argv).configs:
        print(report(config))


if __name__ == "__main__":
    main()
