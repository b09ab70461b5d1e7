"""A task is one entry: an STS, a transfer and a clustering task written as one ``register_task`` call are
evaluated (against computations independent of protoembed's suites: scikit-learn's grid search, k-means
with brute-force matching, scipy's correlations), join their suite's default run, are checked before any
model is loaded, and an STS one trains as a training config's ``test_tasks``; an invalid entry fails when
it is made; installed packages add tasks through the ``protoembed.tasks`` entry points."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.cluster import KMeans
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score, normalized_mutual_info_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold

import protoembed
from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.evaluation.tasks import (
    TaskRegistry,
    classification_file_task,
    clustering_file_task,
    default_tasks,
    pairs_file_task,
    register_task,
)
from sts_toy import ROWS as STS_ROWS
from sts_toy import write_pairs
from training_helpers import write_corpus


@pytest.fixture(scope="module")
def tiny(tiny_model_dirs: dict[str, Path]) -> str:
    return str(tiny_model_dirs["bert"])


def _vectors(model: str, sentences: list[str]) -> np.ndarray:
    return np.asarray(protoembed.load(model).encode(sentences, show_progress_bar=False), dtype=np.float64)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            dict(suites=("ranking",)),
            "task 'T': unknown suite 'ranking': expected one of sts, transfer, fewshot",
        ),
        (dict(dataset="my-data"), "task 'T': unknown `protoembed data` entry 'my-data'"),
        (dict(splits=("validation",)), "task 'T': splits.0: Input should be 'train', 'dev' or 'test'"),
        (dict(main_score="nmi"), "task 'T': main score 'nmi' is not computed by suite sts (it computes: "),
        (dict(splits=("test", "test")), "task 'T': splits: 'test' is listed twice"),
        (dict(name="STS-B"), "task 'STS-B': its name or table name is taken by 'STSBenchmark'"),
        (dict(display="sick-r"), "task 'T': its name or table name is taken by 'SICKRelatedness'"),
        (
            dict(name="STS12"),
            "task 'STS12' is already registered; give another name (or, from Python, replace=True)",
        ),
    ],
)
def test_an_invalid_entry_fails_when_it_is_made(fields: dict[str, Any], message: str) -> None:
    entry = dict(
        name="T",
        suites=("sts",),
        dataset=None,
        files=lambda v, s: [],
        read=lambda root, v, s: None,
        main_score="spearman",
    )
    with pytest.raises(ProtoembedError) as err:
        register_task(**{**entry, **fields})
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert "T" not in protoembed.evaluation.tasks.TASKS  # nothing half-registered


# --------------------------------------------------------------------------- STS


def test_an_sts_task_as_one_entry_trains_as_a_test_task(
    tiny: str, data_dir: Path, tmp_path: Path, register_tasks: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = write_pairs(tmp_path / "my-sts.tsv")
    register_tasks(pairs_file_task("MySTS", None, {"test": str(mine)}, display="My-STS"))
    assert "MySTS" not in default_tasks("sts")  # a user's task joins the default run only when it says so
    register_tasks(pairs_file_task("MySTS-in", None, {"test": str(mine)}, default=True))
    assert default_tasks("sts")[-1] == "MySTS-in"
    corpus = write_corpus(tmp_path / "corpus.txt")
    settings = {"batch_size": 8, "lr": 1e-3, "max_steps": 2, "eval_steps": 2, "eval_batch_size": 256}
    config = tmp_path / "run.yaml"
    config.write_text(
        "\n".join(
            [
                f"model: {tiny}",
                "head: mean",
                "max_seq_length: 16",
                "objective: {name: simcse}",
                f"data: {{corpus: {corpus}, data_dir: {data_dir}}}",
                "training:",
                *[f"  {k}: {v}" for k, v in settings.items()],
                "  test_tasks: [my-sts]",
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    assert main(["train", "--config", str(config), "--output-dir", str(out)]) == 0
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert list(results["tasks"]) == ["MySTS"]
    vectors = _vectors(str(out / "best"), [s for a, b, _ in STS_ROWS for s in (a, b)])
    u, v = vectors[0::2], vectors[1::2]
    cosine = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    expected = spearmanr(cosine, [score for *_, score in STS_ROWS]).statistic * 100
    assert results["tasks"]["MySTS"]["spearman"] == pytest.approx(expected, abs=1e-6)

    # the pre-flight names the task's missing file, before any model is loaded
    mine.unlink()
    capsys.readouterr()
    assert main(["train", "--config", str(config), "--output-dir", str(tmp_path / "again")]) == 2
    err = capsys.readouterr().err
    assert f"test set MySTS: '{mine}' not found" in err and err.count("\n") == 1, err


# --------------------------------------------------------------------------- transfer


def _pair_rows(rng: np.random.Generator, n: int) -> list[tuple[str, str, str]]:
    words = ["river", "piano", "cloud", "garden", "engine", "window", "coffee", "mountain", "paper", "violin"]
    rows = []
    for i in range(n):
        a = " ".join(rng.choice(words, 4))
        same = i % 2 == 0
        b = a if same else " ".join(rng.choice(words, 4))
        rows.append((f"{a} {i}", f"{b} {i}", "para" if same else "other"))
    return rows


def test_a_transfer_task_as_one_entry_equals_scikit_learn(
    tiny: str, tmp_path: Path, register_tasks: Any
) -> None:
    rng = np.random.default_rng(0)
    train, test = _pair_rows(rng, 40), _pair_rows(rng, 20)
    paths = {}
    for split, rows in (("train", train), ("test", test)):
        paths[split] = tmp_path / f"{split}.tsv"
        paths[split].write_text("".join(f"{a}\t{b}\t{label}\n" for a, b, label in rows), encoding="utf-8")
    grid = (0.5, 4.0, 32.0)
    task = classification_file_task(
        "MyPairs", None, {s: str(p) for s, p in paths.items()}, pairs=True, c_grid=grid, f1=True
    )
    register_tasks(task)
    assert "MyPairs" not in default_tasks("transfer") + default_tasks("fewshot")  # named, not default

    got = protoembed.evaluate(tiny, ["MyPairs"], inner_folds=3)["transfer"]
    assert got["protocol"]["C_grid"] == {"MyPairs": list(grid)}

    sentences = list(dict.fromkeys(s for a, b, _ in train + test for s in (a, b)))
    vectors = dict(zip(sentences, _vectors(tiny, sentences)))

    def xy(rows: list[tuple[str, str, str]]) -> tuple[np.ndarray, np.ndarray]:
        u, v = np.array([vectors[a] for a, _, _ in rows]), np.array([vectors[b] for _, b, _ in rows])
        labels = np.array([["other", "para"].index(label) for *_, label in rows])  # classes sorted
        return np.concatenate([np.abs(u - v), u * v], axis=1), labels

    (x_train, y_train), (x_test, y_test) = xy(train), xy(test)
    search = GridSearchCV(
        LogisticRegression(tol=1e-10, max_iter=100_000),
        {"C": list(grid)},
        cv=StratifiedKFold(3, shuffle=True, random_state=1111),
    ).fit(x_train, y_train)
    predicted = search.predict(x_test)
    result = got["tasks"]["MyPairs"]
    assert result["C"] == search.best_params_["C"]
    assert result["dev_acc"] == pytest.approx(search.best_score_ * 100, abs=1e-9)
    assert result["acc"] == pytest.approx(np.mean(predicted == y_test) * 100, abs=1e-9)
    assert result["f1"] == pytest.approx(f1_score(y_test, predicted) * 100, abs=1e-9)
    assert (result["n_train"], result["n_test"], result["classes"]) == (40, 20, 2)


def test_a_transfer_task_out_of_the_default_run_and_its_files_checked_first(
    tmp_path: Path, register_tasks: Any
) -> None:
    register_tasks(
        classification_file_task("Aside", None, {"all": str(tmp_path / "aside.tsv")}, default=False)
    )
    assert "Aside" not in default_tasks("transfer")
    with pytest.raises(ProtoembedError, match=r"task Aside: '.*aside\.tsv' not found; give the path of an"):
        protoembed.evaluate("never-loaded", ["Aside"])  # before the model: there is none


# --------------------------------------------------------------------------- clustering


def test_a_clustering_task_as_one_entry_equals_kmeans_and_brute_force_matching(
    tiny: str, tmp_path: Path, register_tasks: Any
) -> None:
    words = ["red", "blue", "green", "small", "large", "old", "new", "fast", "slow", "warm", "cold", "wet"]
    texts = [
        f"{topic} {word} {i}" for topic in ("sports game", "cooking recipe") for i, word in enumerate(words)
    ]
    labels = [1] * 12 + [2] * 12
    path = tmp_path / "topics.txt"
    path.write_text("".join(f"{label}\t{text}\n" for label, text in zip(labels, texts)), encoding="utf-8")
    register_tasks(clustering_file_task("MyTopics", None, str(path), n_clusters=3))
    assert "MyTopics" not in default_tasks("clustering")  # named, not default

    got = protoembed.evaluate(tiny, ["MyTopics"], runs=2)["clustering"]["tasks"]["MyTopics"]
    vectors, gold = _vectors(tiny, texts), np.array(labels) - 1
    accuracy, nmi = [], []
    for seed in range(2):
        clusters = KMeans(n_clusters=3, n_init=1, random_state=seed).fit_predict(vectors)
        best = max(  # every map of the 3 clusters onto the 2 classes, one cluster left unmatched
            sum(int(clusters[i] == perm[gold[i]]) for i in range(len(gold)))
            for perm in itertools.permutations(range(3), 2)
        )
        accuracy.append(best / len(gold) * 100)
        nmi.append(normalized_mutual_info_score(gold, clusters) * 100)
    assert got["runs_acc"] == pytest.approx(accuracy, abs=1e-9)
    assert got["runs_nmi"] == pytest.approx(nmi, abs=1e-9)
    assert (got["n"], got["classes"]) == (24, 2)


# --------------------------------------------------------------------------- entry points


def test_installed_packages_add_tasks_by_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    (tmp_path / "my_tasks.py").write_text(
        "from protoembed.evaluation.tasks import clustering_file_task\n\n"
        "def tasks():\n"
        "    return [clustering_file_task('PluginSet', None, '/nowhere/plugin.txt')]\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    points = [importlib.metadata.EntryPoint("mine", "my_tasks:tasks", "protoembed.tasks")]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: points)
    registry = TaskRegistry()
    assert list(registry)[-1] == "PluginSet" and "STSBenchmark" in registry
    assert registry["PluginSet"].suites == ("clustering",)

    points[0] = importlib.metadata.EntryPoint("broken", "no_such_module:tasks", "protoembed.tasks")
    with pytest.raises(ProtoembedError, match=r"entry point 'broken' \(no_such_module:tasks\): cannot load"):
        len(TaskRegistry())


# --------------------------------------------------------------------------- a config's tasks


def test_a_training_config_declares_its_own_tasks(tmp_path: Path) -> None:
    from protoembed.evaluation.tasks import TASKS, unregister_task
    from protoembed.training.config import config_from_dict

    mine = write_pairs(tmp_path / "mine.tsv")
    config = {
        "output_dir": str(tmp_path / "run"),
        "data": {"corpus": "c.txt"},
        "objective": {"name": "simcse"},
        "tasks": [{"name": "DeclaredSTS", "kind": "pairs", "files": {"test": str(mine)}, "display": "D-STS"}],
        "training": {"test_tasks": ["d-sts", "STS-B"]},
    }
    try:
        assert config_from_dict(config).training.test_tasks == ["DeclaredSTS", "STSBenchmark"]
        assert config_from_dict(config).training.test_tasks[0] == "DeclaredSTS"  # read twice: the same entry
        pairs = TASKS["DeclaredSTS"].load(None)
        assert pairs.sentences1 == [a for a, _, _ in STS_ROWS] and list(pairs.scores) == [
            s for *_, s in STS_ROWS
        ]
        assert TASKS["DeclaredSTS"].table_name == "D-STS" and "DeclaredSTS" not in default_tasks("sts")
        taken = {**config, "tasks": [{"name": "STS12", "kind": "pairs", "files": {"test": str(mine)}}]}
        with pytest.raises(ProtoembedError, match=r"tasks.*task 'STS12' is already registered"):
            config_from_dict(taken)
        bad = {**config, "tasks": [{"name": "X", "kind": "graph", "files": {"test": str(mine)}}]}
        with pytest.raises(ProtoembedError, match=r"tasks"):
            config_from_dict(bad)
    finally:
        unregister_task("DeclaredSTS")


def test_an_unregistered_entry_is_evaluated_as_a_registered_one(tmp_path: Path, register_tasks: Any) -> None:
    from protoembed.evaluation.sts import evaluate_sts

    def encode(sentences: list[str]) -> np.ndarray:  # two letter counts: a deterministic toy encoder
        return np.array([[s.count("a") + 1.0, s.count("e") + 1.0] for s in sentences])

    task = pairs_file_task("Loose", None, {"test": str(write_pairs(tmp_path / "loose.tsv"))})
    loose = evaluate_sts(encode, None, tasks=[task])
    register_tasks(task)
    assert evaluate_sts(encode, None, tasks=["Loose"]) == loose
    u, v = encode([a for a, _, _ in STS_ROWS]), encode([b for _, b, _ in STS_ROWS])
    cosine = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    expected = spearmanr(cosine, [s for *_, s in STS_ROWS]).statistic * 100
    assert loose["tasks"]["Loose"]["spearman"] == pytest.approx(expected, abs=1e-9)
    with pytest.raises(ProtoembedError, match="task 'Loose' is not a task of suite transfer"):
        protoembed.evaluation.tasks.get_task(task, "transfer")


def test_an_installed_plugin_task_changes_no_default_run(
    tiny: str, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package installed beside protoembed (a real ``*.dist-info`` with a ``protoembed.tasks`` entry point,
    found by importlib.metadata in a new interpreter) adds an STS task that does not ask to be a default:
    ``eval sts``'s run, a papers' config's test tasks and the report still list exactly the papers' tasks;
    the task runs when named."""
    import subprocess
    import sys

    site = tmp_path / "site"
    (site / "plugin_tasks-1.0.dist-info").mkdir(parents=True)
    (site / "plugin_tasks-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: plugin-tasks\nVersion: 1.0\n", encoding="utf-8"
    )
    (site / "plugin_tasks-1.0.dist-info" / "entry_points.txt").write_text(
        "[protoembed.tasks]\nmine = plugin_tasks:tasks\n", encoding="utf-8"
    )
    pairs = write_pairs(tmp_path / "plugin-sts.tsv")
    (site / "plugin_tasks.py").write_text(
        "from protoembed.evaluation.tasks import pairs_file_task\n\n"
        f"def tasks():\n    return [pairs_file_task('PluginSTS', None, {{'test': {str(pairs)!r}}})]\n",
        encoding="utf-8",
    )
    papers = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    probe = (
        "import json; from protoembed.evaluation.tasks import TASKS, default_tasks;"
        "from protoembed.training.config import load_config;"
        f"c = load_config({str(Path(__file__).parents[1] / 'configs' / 'cpu' / 'simcse.yaml')!r});"
        "print(json.dumps(['PluginSTS' in TASKS, default_tasks('sts'), c.training.test_tasks]))"
    )
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [True, papers, papers]
    out, named = tmp_path / "sts.json", tmp_path / "named.json"
    base = [sys.executable, "-m", "protoembed", "eval", "sts", "--model", tiny, "--data-dir", str(data_dir)]
    for argv in ([*base, "--output", str(out)], [*base, "--tasks", "PluginSTS", "--output", str(named)]):
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    assert list(json.loads(out.read_text(encoding="utf-8"))["tasks"]) == papers
    assert list(json.loads(named.read_text(encoding="utf-8"))["tasks"]) == ["PluginSTS"]
    report = subprocess.run(
        [sys.executable, "-m", "protoembed", "report", str(out), "-o", str(tmp_path / "report.md")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    assert "PluginSTS" not in (tmp_path / "report.md").read_text(encoding="utf-8")
