"""``protoembed analyze <analysis>``: the ConPVP paper's embedding-space figures (PNG) and their data (JSON).

Analyses (protoembed.evaluation.analysis), each drawn for every ``--model`` given (one panel or
line per model; one ``--model`` draws one): ``similarity`` (Fig. 4, predicted cosine scaled to [0, 1] vs
gold on STS-B test), ``frequent-tokens`` (Fig. 5, STS average with the top-k frequent tokens left out of
mean pooling), ``tsne`` (Fig. 6, t-SNE of STS-B test pairs with gold 0, 3 and 5), ``fewshot`` (Fig. 7,
violins from few-shot results JSON given as arguments, no model loaded), and ``compare`` (Figs. 4-6 for at
least two models into ``--out-dir``, each model loaded once).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from protoembed.commands.common import add_data_dir_option, add_model_options, load_from_args
from protoembed.core.errors import ProtoembedError
from protoembed.evaluation.analysis_defaults import TOP_K
from protoembed.model.model_spec import ModelSpec
from protoembed.outputs.io import write_json_atomic
from protoembed.report.results import by_table, load_results

ANALYSES = ("similarity", "frequent-tokens", "tsne", "fewshot", "compare")
#: File names of ``compare``'s figures in ``--out-dir`` (the JSON beside each, same stem).
COMPARE_FILES = {
    "similarity": "analysis-similarity.png",
    "frequent-tokens": "analysis-frequent-tokens.png",
    "tsne": "analysis-tsne.png",
}


def model_label(spec: str) -> str:
    """A model's default label: its folder name (the run folder for a trained run's ``best``) or spec."""
    path = Path(spec.rstrip("/"))
    return path.parent.name if path.name == "best" and path.parent.name else path.name or spec


def _labels(args: argparse.Namespace) -> list[str]:
    specs = args.model
    labels = args.label or [model_label(s) for s in specs]
    if len(labels) != len(specs):
        raise ProtoembedError(
            f"--label given {len(labels)} times for {len(specs)} --model; give one per model"
        )
    repeated = sorted({x for x in labels if labels.count(x) > 1})
    if repeated:
        raise ProtoembedError(f"two models share the label {repeated[0]!r}; tell them apart with --label")
    return labels


def _models(args: argparse.Namespace, labels: list[str]) -> Iterator[tuple[str, Any]]:
    """``(label, embedder)``, each model loaded when reached (one in memory at a time)."""
    for spec, label in zip(args.model, labels):
        yield label, load_from_args(argparse.Namespace(**{**vars(args), "model": spec}))


def _top_k(text: str | None) -> list[int]:
    try:
        top_k = [int(k) for k in text.split(",")] if text else list(TOP_K)
    except ValueError:
        top_k = [-1]
    if any(k < 0 for k in top_k):
        raise ProtoembedError(f"--top-k takes comma-separated non-negative integers, got {text!r}")
    return top_k


def _draw(
    name: str, models, figure: str | Path, args: argparse.Namespace, top_k: list[int]
) -> dict[str, Any]:
    from protoembed.evaluation import analysis

    common = {"variant": args.variant, "batch_size": args.batch_size}
    if name == "similarity":
        return analysis.similarity_vs_gold(models, args.data_dir, figure, **common)
    if name == "frequent-tokens":
        return analysis.frequent_token_removal(models, args.data_dir, figure, top_k, **common)
    return analysis.tsne_pairs(models, args.data_dir, figure, args.pairs, args.seed, **common)


def _save(name: str, result: dict[str, Any], output: str | Path, specs: dict[str, str] | None) -> None:
    """Write the figure's JSON (``analysis``, each model's spec) and print a short summary."""
    for entry in result.get("models", []):
        if specs and entry.get("label") in specs:
            entry["model"] = specs[entry["label"]]
    result = {"analysis": name, **result}
    summary = {
        e["label"]: {k: v for k, v in e.items() if k in ("spearman", "pearson", "head", "model", "runs")}
        | ({"avg_by_k": {r["k"]: round(r["avg"], 2) for r in e["rows"]}} if "rows" in e else {})
        for e in result["models"]
    }
    print(json.dumps({name: summary}, indent=2))
    print(f"wrote {result['figure']}", file=sys.stderr)
    print(f"wrote {write_json_atomic(output, result)}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Check the options, load the models (or read the results), draw, write PNG and JSON."""
    top_k = _top_k(args.top_k)
    if args.pairs < 1:  # checked before the slow model load
        raise ProtoembedError(f"--pairs must be at least 1, got {args.pairs}")
    if args.analysis == "fewshot":
        return _fewshot(args)
    if args.results:
        raise ProtoembedError(f"{args.results[0]}: only the fewshot analysis reads results files")
    args.model = args.model or ["default"]
    labels = _labels(args)
    specs = dict(zip(labels, args.model))
    if args.analysis == "compare":
        if len(args.model) < 2:
            raise ProtoembedError(
                f"compare draws models side by side and needs at least two --model; got only {args.model[0]!r} "
                "(for one model use: analyze similarity|frequent-tokens|tsne)"
            )
        if not args.out_dir:
            raise ProtoembedError("compare needs --out-dir (where its three figures and JSON go)")
        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        models = list(_models(args, labels))  # loaded once for the three figures
        for name, file in COMPARE_FILES.items():
            not_mean = [(label, m.head) for label, m in models if m.head != "mean"]
            if name == "frequent-tokens" and not_mean:
                print(
                    f"skipped frequent-tokens: model {not_mean[0][0]!r} has head {not_mean[0][1]!r} "
                    "(it needs mean pooling: --head mean compares mean-pooled token states)",
                    file=sys.stderr,
                )
                continue
            _save(
                name, _draw(name, models, out / file, args, top_k), (out / file).with_suffix(".json"), specs
            )
        return 0
    if not args.figure:
        raise ProtoembedError(f"analyze {args.analysis} needs --figure FILE.png")
    output = args.output or Path(args.figure).with_suffix(".json")
    _save(args.analysis, _draw(args.analysis, _models(args, labels), args.figure, args, top_k), output, specs)
    return 0


def _fewshot(args: argparse.Namespace) -> int:
    """Fig. 7 from few-shot results files (labels as ``protoembed report`` gives them)."""
    if not args.results:
        raise ProtoembedError(
            "analyze fewshot needs few-shot results JSON files (protoembed eval fewshot --output)"
        )
    if not args.figure:
        raise ProtoembedError("analyze fewshot needs --figure FILE.png")
    results = load_results(args.results, args.label or ())
    other = next((r for r in results if r.suite != "fewshot"), None)
    if other is not None:
        raise ProtoembedError(f"{other.path}: {other.suite} results, not few-shot results")
    (table,) = by_table(results)  # few-shot's protocol record has no runtime: one table
    groups = table.groups
    from protoembed.evaluation.fewshot_figure import plot_fewshot_comparison

    drawn = plot_fewshot_comparison(
        [(label, [r.data for r in runs]) for label, runs in groups.items()], args.figure
    )
    for entry in drawn["models"]:
        entry["files"] = [str(r.path) for r in groups[entry["label"]]]
    _save("fewshot", drawn, args.output or Path(args.figure).with_suffix(".json"), None)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``analyze`` to the top-level sub-parsers."""
    parser = subparsers.add_parser(
        "analyze",
        help="embedding-space figures comparing models: similarity vs gold, frequent tokens, t-SNE, few-shot",
        description=__doc__.split("\n\n")[1].replace("\n", " ").replace("``", ""),
        conflict_handler="resolve",
    )
    parser.add_argument(
        "analysis",
        choices=ANALYSES,
        help="the figure: similarity (Fig. 4), frequent-tokens (Fig. 5), tsne (Fig. 6), fewshot (Fig. 7, from "
        "results files), compare (Figs. 4-6 for several models)",
    )
    parser.add_argument("results", nargs="*", metavar="RESULTS.json", help="fewshot: few-shot results files")
    add_model_options(parser)
    parser.add_argument(
        "--model",
        action="append",
        default=None,
        help=f"{ModelSpec.model_fields['model'].description}; repeat to compare models "
        f"(default: {ModelSpec.model_fields['model'].default})",
    )
    parser.add_argument(
        "--label",
        action="append",
        default=None,
        help="name of each --model in order (default: folder name); fewshot: one per file, or OLD=NEW",
    )
    parser.add_argument("--figure", default=None, metavar="FILE.png", help="where to write the figure")
    parser.add_argument(
        "--output", default=None, metavar="FILE.json", help="where to write its data (default: FILE.json)"
    )
    parser.add_argument("--out-dir", default=None, metavar="DIR", help="compare: folder of the figures")
    add_data_dir_option(parser)
    parser.add_argument("--variant", choices=("senteval", "raw"), default="senteval", help="STS data variant")
    parser.add_argument(
        "--top-k", default=None, metavar="K,K,...", help="frequent-tokens: k values (0,1,2,5,10,20,50,100)"
    )
    parser.add_argument(
        "--pairs", type=int, default=10, help="tsne: pairs per gold score 0, 3, 5 (default 10)"
    )
    parser.add_argument("--seed", type=int, default=0, help="tsne: seed of the pair draw and of t-SNE")
    parser.set_defaults(func=run)
