"""Every dataset the configs and evaluation suites read, one :class:`Dataset` entry each.

An entry names the dataset, its license, and its :class:`Source` downloads: the authors' canonical URL,
how the download is unpacked, and the path it lands at under the data directory (exactly the paths the
readers and configs use). sha256 are pinned where known: the whole download (``sha256``, the files
fetched from a pinned Git commit), or files inside an archive (``file_sha256``: SentEval's STS files,
the official STS releases). A download with no pinned sha256 has it recorded, with its size and URL, in
the data directory's manifest at first download, and later runs check against that record
(:mod:`protoembed.data.download.installed`). A download whose size is not pinned has the size its host
publishes (or an estimate) as ``approx_size``, shown as approximate (:class:`Size`) until a download
records the exact bytes.

Adding a dataset is one entry in :data:`DATASETS` (a :class:`~protoembed.core.registry.Registry`). Nothing
here touches the network or the disk.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Literal

from protoembed.core.progress import format_size
from protoembed.core.registry import Registry
from protoembed.data.download.manifest import SENTEVAL_STS_SHA256, STS_RAW_SHA256

#: The Hugging Face dataset repository of SimCSE's training and evaluation files.
SIMCSE_HF = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main"
#: The short-text clustering sets as prepared by Rakib et al. (the SCCL lineage), at a pinned commit.
SCCL_RAW = (
    "https://raw.githubusercontent.com/rashadulrakib/short-text-clustering-enhancement/"
    "f363b66e6fd51f9dd1db679d2a9ce55538ab9868/data"
)
#: The head of SimCSE's wiki1m (the first 1,280,000 bytes) as committed at a pinned commit.
WIKI_SAMPLE_RAW = (
    "https://raw.githubusercontent.com/SadiaAfrinPurba/bert-vae-cnn-for-sentence-similarity/"
    "baa1dbc2c090b303527fe71efabbb351e7e3510b/data/wiki1m_for_simcse.txt"
)
STS_WIKI = "http://ixa2.si.ehu.es/stswiki/images"
#: BEIR's public zips (one folder each: corpus.jsonl, queries.jsonl, qrels/<split>.tsv).
BEIR_ZIPS = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets"

Unpack = Literal["file", "tar", "zip"]


@dataclass(frozen=True)
class Size:
    """A download's size: ``bytes``, and ``exact`` (pinned, or recorded by a download) or not (as published
    or estimated). ``str()``: :func:`~protoembed.core.progress.format_size`."""

    bytes: int
    exact: bool

    def __str__(self) -> str:
        return format_size(self.bytes, self.exact)


@dataclass(frozen=True)
class Source:
    """One download and where it lands.

    ``url``: the canonical source. ``target``: the file (``unpack="file"``) or folder (``tar`` / ``zip``)
    it becomes, relative to the data directory. ``member``: the archive folder installed as ``target``
    (``""``: the archive's root; ``None``: the folder that holds ``marker``, found up to 2 levels down).
    ``sha256`` / ``size``: the download's, when pinned (``None``: recorded at first download).
    ``approx_size``: the download's bytes as published (or estimated) when ``size`` is not pinned.
    ``file_sha256``: pinned sha256 of installed files (paths relative to the data directory).
    ``md5``: the download's md5 as its host publishes it (checked before anything is unpacked).
    """

    url: str
    target: str
    unpack: Unpack = "file"
    member: str | None = ""
    marker: str | None = None
    sha256: str | None = None
    size: int | None = None
    file_sha256: Mapping[str, str] = field(default_factory=dict)
    approx_size: int | None = None
    md5: str | None = None

    def download_size(self, recorded: int | None = None) -> Size | None:
        """The download's size: ``recorded`` (the bytes a download recorded in the manifest) or the pinned
        ``size``, exact; else ``approx_size``, approximate; ``None`` when none is known."""
        if recorded is not None:
            return Size(recorded, True)
        if self.size is not None:
            return Size(self.size, True)
        return None if self.approx_size is None else Size(self.approx_size, False)

    @property
    def filename(self) -> str:
        """The download's file name (the URL's last component)."""
        return PurePosixPath(self.url.split("?", 1)[0]).name or "download"


@dataclass(frozen=True)
class Dataset:
    """One dataset: ``name`` (what ``protoembed data download`` takes), ``title``, ``license``, its
    ``sources`` and the reader ``format`` that serves it (a ``data.format`` name, or the suite that
    reads it)."""

    name: str
    title: str
    license: str
    sources: tuple[Source, ...]
    format: str
    note: str = ""

    @property
    def targets(self) -> tuple[str, ...]:
        """The paths the dataset installs, relative to the data directory."""
        return tuple(s.target for s in self.sources)

    def download_size(self, recorded: Mapping[str, int | None] | None = None) -> Size | None:
        """Total download size of the sources (:meth:`Source.download_size`; ``recorded``: target -> the
        bytes a download recorded), exact when every part is; ``None`` when a source's size is unknown."""
        sizes = [s.download_size((recorded or {}).get(s.target)) for s in self.sources]
        if any(s is None for s in sizes):
            return None
        return Size(sum(s.bytes for s in sizes), all(s.exact for s in sizes))  # type: ignore[union-attr]


def _sts_raw(year: str, zip_name: str, member: str, approx_size: int) -> Source:
    target = f"sts_raw/{year}-en-test"
    pins = {k: v for k, v in STS_RAW_SHA256.items() if k.startswith(target + "/")}
    return Source(f"{STS_WIKI}/{zip_name}", target, "zip", member, file_sha256=pins, approx_size=approx_size)


def _clustering(name: str, title: str, path: str, target: str, size: int, sha256: str) -> Dataset:
    return Dataset(
        name,
        title,
        "research data, no license file in the source repository",
        (Source(f"{SCCL_RAW}/{path}", f"clustering/{target}", sha256=sha256, size=size),),
        "clustering",
    )


def _beir(name: str, title: str, license: str, md5: str, approx_size: int) -> Dataset:
    """A BEIR dataset, ``beir-<name>``: its zip (md5 as BEIR publishes it) unpacked to ``beir/<name>``."""
    source = Source(f"{BEIR_ZIPS}/{name}.zip", f"beir/{name}", "zip", name, md5=md5, approx_size=approx_size)
    return Dataset(f"beir-{name}", title, license, (source,), "retrieval")


DATASETS: Registry[Dataset] = Registry(
    "dataset",
    [
        Dataset(
            "senteval",
            "SentEval data: STS12-16 and STS-B (tokenised, lowercased), SICK, MR, CR, SUBJ, MPQA, SST, TREC, "
            "MRPC, SNLI (SimCSE's senteval.tar)",
            "per task (SemEval STS research use; SICK CC BY-NC-SA 3.0; SNLI CC BY-SA 4.0; MRPC Microsoft "
            "Research terms)",
            (
                Source(
                    f"{SIMCSE_HF}/senteval.tar",
                    "senteval",
                    "tar",
                    member=None,
                    marker="STS",
                    file_sha256={f"senteval/{k}": v for k, v in SENTEVAL_STS_SHA256.items()},
                    approx_size=90_000_000,  # estimated from its files (an uncompressed tar)
                ),
            ),
            "sts, transfer, fewshot; stsb, sick, senteval_nli",
        ),
        Dataset(
            "sts-raw",
            "STS12-16 and STS Benchmark, the official (cased, untokenised) releases",
            "SemEval STS research use (per source; see each release's readme)",
            (
                # sizes estimated from their installed files, compressed
                _sts_raw("STS12", "4/40/STS2012-en-test.zip", "test-gold", 120_000),
                _sts_raw("STS13", "2/2f/STS2013-en-test.zip", "test-gs", 61_000),
                _sts_raw("STS14", "8/8c/STS2014-en-test.zip", "sts-en-test-gs-2014", 141_000),
                _sts_raw("STS15", "d/da/STS2015-en-test.zip", "test_evaluation_task2a", 360_000),
                _sts_raw("STS16", "9/98/STS2016-en-test.zip", "sts2016-english-with-gs-v1.0", 585_000),
                Source(
                    f"{STS_WIKI}/4/48/Stsbenchmark.tar.gz",
                    "sts_raw/stsbenchmark",
                    "tar",
                    "stsbenchmark",
                    file_sha256={k: v for k, v in STS_RAW_SHA256.items() if k.startswith("sts_raw/stsb")},
                    approx_size=409_000,
                ),
            ),
            "sts (--variant raw); stsb",
        ),
        Dataset(
            "wiki1m",
            "SimCSE's 1M English Wikipedia sentences (unsupervised training corpus)",
            "Wikipedia text, CC BY-SA 3.0",
            (
                Source(
                    f"{SIMCSE_HF}/wiki1m_for_simcse.txt",
                    "unsup/wiki1m_for_simcse.txt",
                    approx_size=121_000_000,
                ),
            ),
            "text",
        ),
        Dataset(
            "wiki1m-sample",
            "The first 1,280,000 bytes of wiki1m (11,929 sentences; the CPU configs' corpus)",
            "Wikipedia text, CC BY-SA 3.0",
            (
                Source(
                    WIKI_SAMPLE_RAW,
                    "unsup/wiki1m_sample/wiki1m_for_simcse.head-1280000B.txt",
                    sha256="e8b96b77ffcd3226cbddb6e9eb1185bcefee7118d6281792970a5e7a31432c42",
                    size=1280000,
                ),
            ),
            "text",
            note="the last line is cut mid-sentence; the text reader drops it",
        ),
        Dataset(
            "nli-simcse",
            "SimCSE's NLI triplets (premise, entailment, contradiction) from SNLI + MultiNLI",
            "CC BY-SA 4.0 (SNLI), MultiNLI's OANC / CC BY-SA 3.0 terms",
            # estimated: 275,601 triplets of SNLI + MultiNLI sentences
            (Source(f"{SIMCSE_HF}/nli_for_simcse.csv", "nli/nli_for_simcse.csv", approx_size=47_000_000),),
            "simcse_nli",
        ),
        Dataset(
            "snli",
            "SNLI 1.0 (570k pairs; train / dev / test .jsonl and .txt)",
            "CC BY-SA 4.0",
            (
                Source(
                    "https://nlp.stanford.edu/projects/snli/snli_1.0.zip",
                    "nli/snli_1.0",
                    "zip",
                    "snli_1.0",
                    approx_size=94_550_081,  # as the host serves it (the datasets library's recorded checksum)
                ),
            ),
            "snli_jsonl, nli_txt",
        ),
        Dataset(
            "multinli",
            "MultiNLI 1.0 (433k pairs; train / dev matched / dev mismatched .jsonl and .txt)",
            "OANC and CC BY-SA 3.0 parts (see its README)",
            (
                Source(
                    "https://cims.nyu.edu/~sbowman/multinli/multinli_1.0.zip",
                    "nli/multinli_1.0",
                    "zip",
                    "multinli_1.0",
                    approx_size=226_850_426,  # as the host serves it (the datasets library's recorded checksum)
                ),
            ),
            "snli_jsonl, nli_txt",
        ),
        _clustering(
            "agnews",
            "AgNews 8k (4 classes)",
            "agnewsdataraw-8000",
            "agnews8k/agnewsdataraw-8000",
            1334725,
            "9a3ecfb3d5daef1cdef2fa1cc23d1f1c23784220116c39072d6d8422f5781c06",
        ),
        _clustering(
            "searchsnippets",
            "SearchSnippets (8 classes)",
            "search_snippets/search_snippets_true_text",
            "searchsnippets/search_snippets_true_text",
            1832132,
            "e39dbcb5d956c2a34d1a68727c18b05646dfd4921857f7f61beccf6481e94787",
        ),
        _clustering(
            "stackoverflow",
            "StackOverflow titles (20 classes)",
            "stackoverflow/stackoverflow_true_text",
            "stackoverflow/stackoverflow_true_text",
            1120967,
            "e683a764d1c05828ee13828695fb273c3d61991b853af716da383061356e9ff5",
        ),
        _clustering(
            "biomedical",
            "Biomedical titles (20 classes)",
            "biomedical/biomedical_true_text",
            "biomedical/biomedical_true_text",
            1893212,
            "a52cc072e35bfac1a971880ff3222239438cea24571b8910dd549f1831b34a04",
        ),
        _clustering(
            "tweet",
            "Tweet (89 classes)",
            "tweet-original-order.txt",
            "tweet/tweet-original-order.txt",
            156097,
            "bd63058a56d4b2ff35eca50db6fdbdf51d4dbc222e16604cbcaad813c2831479",
        ),
        _clustering(
            "googlenews-ts",
            "GoogleNews-TS (152 classes)",
            "TS",
            "googlenews/TS",
            2245797,
            "a2bd94663542b849477b0a2a95a23626a7c8af50d50978056159997ddd800065",
        ),
        _clustering(
            "googlenews-t",
            "GoogleNews-T (152 classes)",
            "T",
            "googlenews/T",
            502278,
            "4b4a5feeaa35e7e96e08203fe44f0b5b136c7d1e01eba3a282d25ae4ecae8f8c",
        ),
        _clustering(
            "googlenews-s",
            "GoogleNews-S (152 classes)",
            "S",
            "googlenews/S",
            1777019,
            "004e6210fbfcd11414f27b8bb6a83df6051bb8449c063b9d77955e2df0294082",
        ),
        # BEIR: the sizes are estimates (approximate until a download records them)
        _beir(
            "scifact",
            "SciFact (BEIR): 300 test claims, 5,183 abstracts",
            "CC BY-NC 2.0",
            "5f7d1de60b170fc8027bb7898e2efca1",
            2_816_079,
        ),
        _beir(
            "nfcorpus",
            "NFCorpus (BEIR): 323 test queries, 3,633 medical documents",
            "research use (see the NFCorpus homepage)",
            "a89dba18a62ef92f7d323ec890a0d38d",
            2_400_000,
        ),
        _beir(
            "fiqa",
            "FiQA-2018 (BEIR): 648 test questions, 57,638 financial posts",
            "research use (FiQA 2018 challenge terms)",
            "17918ed23cd04fb15047f73e6c3bd9d9",
            17_900_000,
        ),
        _beir(
            "arguana",
            "ArguAna (BEIR): 1,406 test arguments, 8,674 counter-arguments",
            "CC BY-SA 4.0",
            "8ad3e3c2a5867cdced806d6503f29b99",
            3_800_000,
        ),
        _beir(
            "scidocs",
            "SCIDOCS (BEIR): 1,000 test paper titles, 25,657 abstracts",
            "CC BY 4.0",
            "38121350fc3a4d2f48850f6aff52e4a9",
            28_000_000,
        ),
        _beir(
            "quora",
            "Quora duplicate questions (BEIR): 10,000 test questions, 522,931 questions",
            "Quora's terms (non-commercial research)",
            "18fb154900ba42a600f84b839c173167",
            16_000_000,
        ),
        _beir(
            "trec-covid",
            "TREC-COVID (BEIR): 50 test topics, 171,332 CORD-19 documents",
            "CORD-19's terms (per source)",
            "ce62140cb23feb9becf6270d0d1fe6d1",
            73_000_000,
        ),
    ],
)


def get_dataset(name: str) -> Dataset:
    """The registry entry ``name``; one line listing the known names when there is none."""
    return DATASETS.lookup(name)


def dataset_for_path(path: str) -> Dataset | None:
    """The dataset whose installed target is ``path`` or a folder above it (``path`` relative to the data
    directory, ``/``-separated); ``None`` when no entry provides it."""
    parts = PurePosixPath(path.replace("\\", "/")).parts
    for dataset in DATASETS.values():
        for target in dataset.targets:
            tparts = PurePosixPath(target).parts
            if parts[: len(tparts)] == tparts:
                return dataset
    return None
