"""protoembed: train and evaluate sentence embeddings.

Public API (``__all__``; scripts such as the studies in ``experiments/`` use only these names):

- :func:`load` (backbone + head -> :class:`Embedder`; an export folder -> an ``ExportedEmbedder`` with the
  same ``encode``, run by ONNX Runtime or OpenVINO), :meth:`Embedder.encode`, :meth:`Embedder.save`,
  :func:`export_embedder` (ONNX / OpenVINO export) and :func:`evaluate` (a model on named tasks -> per
  suite, the results JSON ``protoembed eval`` writes);
- :func:`search` (a model, queries and a corpus of texts -> per query the best documents, exact or by a
  FAISS index; the queries and documents with the model's ``query`` / ``document`` prompts) and
  :func:`similarity` (the cosine or dot-product matrix of two sets of vectors);
- :func:`load_run`: a training config file (``protoembed train --config``) read and validated, as
  ``[(stage name, config)]`` (one entry, named ``""``, for a single run);
- :func:`load_results` and :func:`build_report`: results JSON files or run folders read back, and the
  markdown page ``protoembed report`` writes from them;
- :class:`Task`, :func:`register_task` and :func:`get_task`: a task of one's own (known by name to
  ``eval``, :func:`evaluate`, the report and training's ``selection`` and ``test_tasks``), and looking one up;
- :class:`Evaluator`: tasks of any suite with their split, options and metric, run on a model (each
  suite's results JSON) and scored as one number; what ``eval``, :func:`evaluate` and training (its
  ``evaluator=``, a config's ``training.selection``) run;
- :func:`encode_corpus` (a corpus file of any size -> a folder of ``.npy`` shards and a manifest, streamed,
  resumable, over several processes; ``protoembed encode INPUT -o OUT_DIR``) and :func:`open_corpus` (a
  finished folder as one memory-mapped array, :class:`~protoembed.corpus.CorpusVectors`);
  :func:`encode_dataset` (a Ray Dataset's texts -> the same Dataset with their vectors, on Ray Data's actors);
- :func:`mine_hard_negatives`: (anchor, positive) pairs -> (anchor, positive, negative) examples with
  hard negatives mined by an embedding model (``protoembed mine``);
- :func:`resolve_data_dir`: the benchmark data directory (``--data-dir``, else ``$PROTOEMBED_DATA``, else
  the user data directory), checked;
- :func:`table_name`: the name the papers' tables print for a task (``STSBenchmark`` -> ``STS-B``);
- :mod:`run_layout`: the names inside a training run's folder (``results.json``, ``best/``...) and
  :func:`run_layout.dev_score`, the dev score that chose a run's kept model;
- :class:`ProtoembedError`: the error of a mistake the user can fix (a one-line message).

Each is imported on first use (from :mod:`protoembed.model.loading`, :mod:`protoembed.model.embedder`,
:mod:`protoembed.model.export.graph`, :mod:`protoembed.evaluation.run`, :mod:`protoembed.evaluation.evaluator`,
:mod:`protoembed.training.stages`,
:mod:`protoembed.report`, :mod:`protoembed.retrieval.mining`, :mod:`protoembed.evaluation.tasks`,
:mod:`protoembed.data.paths`, :mod:`protoembed.outputs.run_layout`, :mod:`protoembed.retrieval.semantic_search`,
:mod:`protoembed.corpus` and :mod:`protoembed.core.errors`), so ``import protoembed`` (and the CLI's
``--help``) does not load torch. The package's layers, one folder each, are described in ``docs/layout.md``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from protoembed.core.version import __version__

if TYPE_CHECKING:  # the public names, for type checkers (``name as name``: re-exported)
    from protoembed.core.errors import ProtoembedError as ProtoembedError
    from protoembed.corpus import encode_corpus as encode_corpus
    from protoembed.corpus import open_corpus as open_corpus
    from protoembed.corpus.ray_engine import encode_dataset as encode_dataset
    from protoembed.data.paths import resolve_data_dir as resolve_data_dir
    from protoembed.evaluation.evaluator import Evaluator as Evaluator
    from protoembed.evaluation.run import evaluate as evaluate
    from protoembed.evaluation.tasks import Task as Task
    from protoembed.evaluation.tasks import get_task as get_task
    from protoembed.evaluation.tasks import register_task as register_task
    from protoembed.evaluation.tasks import table_name as table_name
    from protoembed.model.embedder import Embedder as Embedder
    from protoembed.model.export.graph import export_embedder as export_embedder
    from protoembed.model.loading import load as load
    from protoembed.outputs import run_layout as run_layout
    from protoembed.report import build_report as build_report
    from protoembed.report import load_results as load_results
    from protoembed.retrieval.mining import mine_hard_negatives as mine_hard_negatives
    from protoembed.retrieval.semantic_search import search as search
    from protoembed.retrieval.semantic_search import similarity as similarity
    from protoembed.training.stages import load_run as load_run

#: public name -> the module that defines it (a public module, one of :data:`_MODULES`: the package that
#: holds it).
_HOMES = {
    "Embedder": "protoembed.model.embedder",
    "Evaluator": "protoembed.evaluation.evaluator",
    "ProtoembedError": "protoembed.core.errors",
    "Task": "protoembed.evaluation.tasks",
    "build_report": "protoembed.report",
    "encode_corpus": "protoembed.corpus",
    "encode_dataset": "protoembed.corpus.ray_engine",
    "evaluate": "protoembed.evaluation.run",
    "export_embedder": "protoembed.model.export.graph",
    "get_task": "protoembed.evaluation.tasks",
    "load": "protoembed.model.loading",
    "load_results": "protoembed.report",
    "load_run": "protoembed.training.stages",
    "mine_hard_negatives": "protoembed.retrieval.mining",
    "open_corpus": "protoembed.corpus",
    "register_task": "protoembed.evaluation.tasks",
    "resolve_data_dir": "protoembed.data.paths",
    "run_layout": "protoembed.outputs",
    "search": "protoembed.retrieval.semantic_search",
    "similarity": "protoembed.retrieval.semantic_search",
    "table_name": "protoembed.evaluation.tasks",
}
#: The public names that are modules.
_MODULES = frozenset({"run_layout"})


def __getattr__(name: str) -> Any:
    """A public name of :data:`_HOMES`, imported (``Embedder``, ``load`` and ``export_embedder`` with
    torch) when first asked for."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    home = _HOMES[name]
    return import_module(f"{home}.{name}") if name in _MODULES else getattr(import_module(home), name)


__all__ = [*_HOMES, "__version__"]
