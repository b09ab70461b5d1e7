"""``protoembed data list | download | verify``: the benchmark data directory and its datasets.

``download NAME... | --all | --for CONFIG|TASK|SUITE...`` fetches registry datasets
(:mod:`protoembed.data.download.registry`) into the data directory (``--data-dir`` / ``--dest``, else
``$PROTOEMBED_DATA``, else the user data directory: :mod:`protoembed.data.paths`); ``--for`` takes
exactly what a training config reads (its stages and ``base:`` files included) and the STS data its evaluation reads, or the ``protoembed data`` entry that an evaluation task's
entry names (:data:`protoembed.evaluation.tasks.TASKS`; a suite name: its default tasks); ``--dry-run``
prints the plan and fetches nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from protoembed.commands.common import add_data_dir_option
from protoembed.core.errors import ProtoembedError
from protoembed.data.paths import DATA_ENV, DataDir, check_data_dir, choose_data_dir

#: What ``list`` checks, said in its header: sizes only (cheap), the hashes are ``verify``'s.
LIST_CHECKS = (
    "state: files present with their recorded sizes (sizes only: `protoembed data verify` checks the sha256)\n"
    "size: the download's (~: approximate, until a download records the exact bytes)"
)


def _data_dir(args: argparse.Namespace, must_exist: bool) -> DataDir:
    """The data directory of ``--data-dir`` / ``$PROTOEMBED_DATA`` / the default, checked."""
    chosen = choose_data_dir(args.data_dir)
    check_data_dir(chosen, must_exist)
    return chosen


def _header(chosen: DataDir) -> str:
    return f"data directory: {chosen.path} ({chosen.why})"


def _shown(size: object) -> str:
    """A :class:`~protoembed.data.download.registry.Size` as printed; ``?`` for none."""
    return "?" if size is None else str(size)


def run_list(args: argparse.Namespace) -> int:
    """``protoembed data list``: every dataset with installed / missing / corrupt, size and license."""
    from protoembed.data.download.installed import read_manifest, status
    from protoembed.data.download.registry import DATASETS

    chosen = _data_dir(args, must_exist=False)
    root = chosen.path
    manifest = read_manifest(root) if root.is_dir() else {}
    print(_header(chosen))
    print(LIST_CHECKS)
    print(f"{'dataset':<15} {'state':<10} {'size':>9}  license / note")
    for dataset in DATASETS.values():
        st = status(root, dataset, manifest)
        size = _shown(st.size)
        detail = f" ({st.detail})" if st.detail else ""
        print(f"{dataset.name:<15} {st.state:<10} {size:>9}  {dataset.license}{detail}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    """``protoembed data verify``: re-hash what is installed against the manifest and the pins."""
    from protoembed.data.download.installed import read_manifest, verify
    from protoembed.data.download.registry import DATASETS, get_dataset

    chosen = _data_dir(args, must_exist=True)
    root = chosen.path
    manifest = read_manifest(root)
    datasets = [get_dataset(n) for n in args.names] if args.names else list(DATASETS.values())
    print(_header(chosen))
    bad = 0
    for dataset in datasets:
        if not any((root / t).exists() for t in dataset.targets):
            if args.names:
                print(f"{dataset.name}: not installed")
                bad += 1
            continue
        ok, detail = verify(root, dataset, manifest)
        recorded = all(t in manifest for t in dataset.targets if (root / t).exists())
        note = "" if recorded else " (not downloaded by protoembed: pinned files only)"
        print(f"{dataset.name}: {'ok' if ok else 'CORRUPT'}, {detail}{note}")
        bad += not ok
    return 1 if bad else 0


def _for_config(config: str) -> tuple[list, list[str]]:
    """The needs of one training config, and its files that no dataset provides (the user's own)."""
    from protoembed.training.needs import config_needs
    from protoembed.training.stages import load_run

    needs = config_needs(load_run(config))
    return needs, [f"{config}: {n.what}: {n.path}" for n in needs if n.dataset is None]


def _for_tasks(value: str) -> list:
    """The needs of a suite's default tasks (``value`` a suite name) or of one task (its name or table
    name), in the default data variant."""
    from protoembed.data.needs import task_needs
    from protoembed.evaluation.suite import SUITES
    from protoembed.evaluation.tasks import default_tasks, get_task

    if value in SUITES:
        return task_needs([get_task(name) for name in default_tasks(value)], None)
    try:
        return task_needs([get_task(value)], None)
    except ProtoembedError as err:
        raise ProtoembedError(
            f"--for: {err}; or a suite ({', '.join(SUITES)}), or a training config (.yaml)"
        ) from None


def _for(values: list[str]) -> tuple[list, list]:
    """The datasets that the training configs, suites and tasks of ``--for`` read, and the configs'
    files that no dataset provides (the user's own)."""
    datasets: dict[str, object] = {}
    own: list[str] = []
    for value in values:
        is_config = value.endswith((".yaml", ".yml"))
        if Path(value).is_file() and not is_config:
            raise ProtoembedError(f"--for {value}: not a training config (expected a .yaml file)")
        if is_config and not Path(value).is_file():
            raise ProtoembedError(f"--for {value}: no such config file")
        if is_config:
            needs, mine = _for_config(value)
            own += mine
        else:
            needs = _for_tasks(value)
        for need in needs:
            if need.dataset is not None:
                datasets.setdefault(need.dataset.name, need.dataset)
    return list(datasets.values()), own


def run_download(args: argparse.Namespace) -> int:
    """``protoembed data download``: fetch, check and install datasets (see the module docstring)."""
    from protoembed.core.progress import format_size
    from protoembed.data.download.fetch import check_mirror
    from protoembed.data.download.install import damaged, install, install_steps
    from protoembed.data.download.installed import read_manifest, recorded_size
    from protoembed.data.download.registry import DATASETS, get_dataset

    mirror = check_mirror(args.mirror)
    chosen = {n: get_dataset(n) for n in args.names}
    own: list[str] = []
    if args.all:
        chosen.update(DATASETS)
    if args.for_configs:
        found, own = _for(args.for_configs)
        chosen.update({d.name: d for d in found})
    if not chosen:
        raise ProtoembedError(
            f"name the datasets to fetch ({', '.join(DATASETS)}), or pass --all or --for CONFIG.yaml / TASK / SUITE"
        )
    where = _data_dir(args, must_exist=False)
    root = where.path
    datasets = list(chosen.values())
    for line in own:
        print(f"not fetched (your own file): {line}")
    if args.dry_run:
        manifest = read_manifest(root) if root.is_dir() else {}
        bad = set() if args.force else {d.name for d, _ in damaged(datasets, root, manifest)}
        for step in install_steps(datasets, root, mirror):
            if step.dataset.name in bad:
                state = "installed but its files differ: --force downloads it again"
            else:
                state = "installed" if step.installed else "to fetch"
            size = _shown(step.source.download_size(recorded_size(manifest, step.source.target)))
            print(f"{step.dataset.name:<15} {size:>9}  {step.url} -> {step.target} ({state})")
        return 0

    def report(step, result) -> None:
        if result is None:
            print(f"{step.dataset.name}: {step.target} already installed (--force replaces it)")
        else:
            print(f"{step.dataset.name}: {step.target} ({format_size(result.size)}, {result.checked})")

    try:
        install(
            datasets,
            root,
            mirror=mirror,
            force=args.force,
            on_step=report,
            verify_hashes=not args.no_verify,
            progress=not args.quiet,  # a bar on a terminal, a line every 10 s elsewhere
        )
    except KeyboardInterrupt:
        print(
            "protoembed data: interrupted; rerun the same command to continue (the bytes received are kept)",
            file=sys.stderr,
        )
        return 130
    if where.source == "flag" and choose_data_dir(None).path != root:
        print(f"use it with --data-dir {root} or: export {DATA_ENV}={root}")
    elif where.source == "default":
        print(_header(where))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``data`` and its actions to the top-level sub-parsers."""
    parser = subparsers.add_parser("data", help="fetch, list or verify the benchmark data")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = actions.add_parser("list", help="every dataset: installed / missing / corrupt, size, license")
    add_data_dir_option(listing, "--dest")
    listing.set_defaults(func=run_list)

    download = actions.add_parser(
        "download",
        help="download datasets by name, --all, or --for a training config, task or suite",
        description="Download, check (sha256) and install datasets into the data directory. Interrupted "
        "downloads resume on the next run; a failure leaves every dataset absent or complete.",
    )
    download.add_argument("names", nargs="*", metavar="NAME", help="datasets (see `protoembed data list`)")
    download.add_argument("--all", action="store_true", help="every dataset")
    download.add_argument(
        "--for",
        dest="for_configs",
        nargs="+",
        default=[],
        metavar="CONFIG|TASK|SUITE",
        help="what these read: a training config (stages and base: files included, and its STS evaluation), "
        "an evaluation task (STS-B, MR, Tweet, ...) or a suite's default tasks (sts, transfer, fewshot, "
        "clustering)",
    )
    add_data_dir_option(download, "--dest")
    download.add_argument(
        "--mirror", default=None, metavar="URL", help="fetch every source scheme://HOST/PATH as URL/HOST/PATH"
    )
    download.add_argument(
        "--dry-run", action="store_true", help="print datasets, URLs, sizes, targets; fetch nothing"
    )
    download.add_argument("--force", action="store_true", help="replace datasets already installed")
    download.add_argument(
        "--no-verify",
        action="store_true",
        help="accept files whose sha256 differs from the pinned or recorded one",
    )
    download.add_argument("--quiet", action="store_true", help="no download progress on stderr")
    download.set_defaults(func=run_download)

    check = actions.add_parser("verify", help="re-hash installed datasets against the manifest and the pins")
    check.add_argument("names", nargs="*", metavar="NAME", help="datasets (default: every installed one)")
    add_data_dir_option(check, "--dest")
    check.set_defaults(func=run_verify)
