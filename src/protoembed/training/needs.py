"""What a training config reads, for the pre-flight check of ``protoembed train`` and ``protoembed data
download --for CONFIG`` (:mod:`protoembed.data.needs` names the missing file and its fetch command).

A config reads, in each stage: its ``data.corpus`` files (a ``save_to_disk`` folder counts as one; a
``hub:`` dataset is the ``datasets`` library's to fetch), the files of ``training.selection``'s tasks
on its split and of ``training.test_tasks`` on their test split (their task entries' files; STS data in
the config's ``training.eval_variant``). A run with neither reads only its training files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from protoembed.data.needs import Need, need_file
from protoembed.data.training.hf import HUB_PREFIX

if TYPE_CHECKING:
    from protoembed.training.config_models import TrainConfig


def stage_needs(name: str, cfg: TrainConfig) -> list[Need]:
    """The files one training stage reads (see the module docstring)."""
    stage = f"stage {name!r}: " if name else ""
    data_dir = cfg.data.data_dir
    needs = [
        need_file(f.path, f"{stage}training file", data_dir)
        for f in cfg.data.files()
        if not f.path.startswith(HUB_PREFIX)  # a hub dataset: fetched by datasets itself
    ]
    selection = cfg.selection_evaluator(data_dir)
    if selection is not None:
        needs += selection.needs(f"{stage}model selection on")
    tests = cfg.test_evaluator(data_dir)
    if tests is not None:
        needs += tests.needs(f"{stage}test set")
    return needs


def config_needs(stages: Sequence[tuple[str, TrainConfig]]) -> list[Need]:
    """The files every stage of a run reads, each path once (first use kept)."""
    seen: dict[tuple[str, str | None], Need] = {}
    for name, cfg in stages:
        for need in stage_needs(name, cfg):
            seen.setdefault((need.path, need.data_dir), need)
    return list(seen.values())
