"""A task is one entry: an STS, a transfer and a clustering task written as one ``register_task`` call are
evaluated (against computations independent of protoembed's suites: scikit-learn's grid search, k-means
with brute-force matching, scipy's correlations), leave the papers' default runs as they are, are checked
before any model is loaded, and an STS one trains as a training config's ``test_tasks``; an invalid entry
fails when it is made; installed packages add tasks through the ``protoembed.tasks`` entry points (a
broken one is skipped); a config's declared tasks are its run's own."""

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

#: The papers' STS run (STS tables' columns), in order.
PAPERS_STS = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]


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
    papers = default_tasks("sts")
    register_tasks(pairs_file_task("MySTS", None, {"test": str(mine)}, display="My-STS"))
    register_tasks(pairs_file_task("MySTS-in", None, {"test": str(mine)}, default=True))
    assert default_tasks("sts") == papers == PAPERS_STS  # a papers' suite runs a closed list
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


def _entry_points(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, modules: dict[str, str]) -> list[Any]:
    """Entry points ``name -> module:tasks`` of the group ``protoembed.tasks``, each module's source given,
    as importlib.metadata would list them."""
    import importlib.metadata

    for name, source in modules.items():
        (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    points = [importlib.metadata.EntryPoint(name, f"{name}:tasks", "protoembed.tasks") for name in modules]
    monkeypatch.setattr(
        importlib.metadata, "entry_points", lambda group: points if group == "protoembed.tasks" else []
    )
    return points


def test_installed_packages_add_tasks_by_entry_point_and_a_broken_one_costs_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A package whose entry point fails to import, gives no Task or takes a built-in task's name is
    skipped with one warning naming it; every built-in entry and the working package's stay, loaded once."""
    tasks_module = protoembed.evaluation.tasks
    builtin, calls = tasks_module._builtin, []
    monkeypatch.setattr(tasks_module, "_builtin", lambda: calls.append(1) or builtin())
    _entry_points(
        monkeypatch,
        tmp_path,
        {
            "raising": "raise ImportError('no module named torch_extra')\n",
            "mine_tasks": "from protoembed.evaluation.tasks import clustering_file_task\n\n"
            "def tasks():\n    return [clustering_file_task('PluginSet', None, '/nowhere/plugin.txt')]\n",
            "not_tasks": "def tasks():\n    return ['STS12']\n",
            "taken": "from protoembed.evaluation.tasks import clustering_file_task\n\n"
            "def tasks():\n    return [clustering_file_task('Fine', None, '/f.txt'), "
            "clustering_file_task('Tweet2', None, '/t.txt', display='tweet')]\n",
        },
    )
    registry = TaskRegistry()
    with caplog.at_level("WARNING", logger="protoembed.evaluation.tasks"):
        names = list(registry)
        assert list(registry) == names and calls == [1]  # loaded once
    assert names == [*(t.name for t in builtin()), "PluginSet"]  # the built-in entries, then the package's
    assert (
        registry["PluginSet"].suites == ("clustering",) and "Fine" not in registry
    )  # a package: all or none
    assert [r.getMessage() for r in caplog.records] == [
        "task plugin 'raising' (raising:tasks) skipped: no module named torch_extra",
        "task plugin 'not_tasks' (not_tasks:tasks) skipped: expected Task entries",
        "task plugin 'taken' (taken:tasks) skipped: task 'Tweet2': its name or table name is taken by 'Tweet'",
    ]
    monkeypatch.setattr(tasks_module, "TASKS", registry)  # as the process's registry: every lookup works
    assert protoembed.get_task("STS-B").name == "STSBenchmark" and default_tasks("sts") == PAPERS_STS


def test_a_plugins_default_applies_to_its_own_suite_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_dir: Path
) -> None:
    """A package's task marked ``default`` on STS and on a suite of the package's own joins that suite's
    default run only: the papers' STS run, its tasks and its average are those without the package."""
    from protoembed.evaluation.sts import evaluate_sts
    from protoembed.evaluation.suite import SUITES, CommandLine, ReportLayout, Suite

    def encode(sentences: list[str]) -> np.ndarray:  # letter counts: a deterministic toy encoder
        return np.array([[s.count(c) + 1.0 for c in "aeiou"] for s in sentences])

    before = evaluate_sts(encode, data_dir)
    toy = Suite(
        "toysuite",
        ("spearman",),
        evaluate=lambda inputs, tasks: {},
        format_table=str,
        command=CommandLine("toy", "toy"),
        report=ReportLayout(99, "Toy", str, ()),
    )
    monkeypatch.setitem(SUITES, "toysuite", toy)
    pairs = write_pairs(tmp_path / "plugin.tsv")
    _entry_points(
        monkeypatch,
        tmp_path,
        {
            "plugin_defaults": "from protoembed.evaluation.tasks import make_task, pairs_file_task\n\n"
            f"sts = pairs_file_task('PluginSTS', None, {{'test': {str(pairs)!r}}})\n"
            "def tasks():\n    return [make_task(**{**dict(sts), 'suites': ('toysuite', 'sts'), 'default': True})]\n"
        },
    )
    monkeypatch.setattr(protoembed.evaluation.tasks, "TASKS", TaskRegistry())
    assert default_tasks("toysuite") == ["PluginSTS"] and default_tasks("sts") == PAPERS_STS
    after = evaluate_sts(encode, data_dir)
    assert list(after["tasks"]) == PAPERS_STS and after == before
    assert list(evaluate_sts(encode, data_dir, tasks=["PluginSTS"])["tasks"]) == ["PluginSTS"]  # when named


# --------------------------------------------------------------------------- a config's tasks


def test_a_training_config_declares_its_own_tasks(tmp_path: Path, tiny: str) -> None:
    """A config's tasks are its run's: two configs declaring ``my-dev`` with other files load in one
    process and their evaluators score their own files (equal to scipy on each); nothing is registered,
    so a config that fails validation leaves nothing behind."""
    from protoembed.evaluation.tasks import TASKS
    from protoembed.training.config import config_from_dict

    other_rows = [(a, b, 5.0 - score) for a, b, score in STS_ROWS]  # the same sentences, gold reversed

    def config(name: str, rows: list[tuple[str, str, float]], **more: Any) -> dict[str, Any]:
        path = write_pairs(tmp_path / f"{name}.tsv", rows)
        declared = {"name": "my-dev", "kind": "pairs", "files": {"dev": str(path), "test": str(path)}}
        return {
            "output_dir": str(tmp_path / name),
            "data": {"corpus": "c.txt"},
            "objective": {"name": "simcse"},
            "tasks": [{**declared, "display": "My-Dev"}],
            "training": {"selection": {"task": "My-Dev"}, "test_tasks": ["my-dev", "STS-B"]},
            **more,
        }

    first, second = (
        config_from_dict(config("first", STS_ROWS)),
        config_from_dict(config("second", other_rows)),
    )
    assert first.training.test_tasks == second.training.test_tasks == ["my-dev", "STSBenchmark"]
    assert "my-dev" not in TASKS  # the runs' own, never registered
    model = protoembed.load(tiny)
    u, v = (model.encode([row[i] for row in STS_ROWS]) for i in (0, 1))
    cosine = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    for cfg, rows, name in ((first, STS_ROWS, "first"), (second, other_rows, "second")):
        expected = spearmanr(cosine, [score for *_, score in rows]).statistic * 100
        evaluator = cfg.selection_evaluator(None)
        assert evaluator is not None and evaluator(model) == pytest.approx(expected, abs=1e-6)
        tests = cfg.test_evaluator(None)  # what the pre-flight checks: its own file
        assert tests is not None and tests.needs()[0].path == str(tmp_path / f"{name}.tsv")

    with pytest.raises(ProtoembedError, match="objective"):  # invalid elsewhere: its task stays its own
        config_from_dict(config("third", STS_ROWS, objective={"name": "no-such-objective"}))
    with pytest.raises(ProtoembedError, match="unknown task 'my-dev'"):
        protoembed.get_task("my-dev")
    taken = {
        **config("fourth", STS_ROWS),
        "tasks": [{"name": "STS12", "kind": "pairs", "files": {"test": "x"}}],
    }
    with pytest.raises(
        ProtoembedError, match=r"tasks.*task 'STS12': its name or table name is taken by 'STS12'"
    ):
        config_from_dict(taken)
    bad = {**config("fifth", STS_ROWS), "tasks": [{"name": "X", "kind": "graph", "files": {"test": "x"}}]}
    with pytest.raises(ProtoembedError, match=r"tasks"):
        config_from_dict(bad)


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
    found by importlib.metadata in a new interpreter) adds an STS task that asks to be a default: ``eval
    sts``'s run (a closed list), a papers' config's test tasks and the report still list exactly the papers'
    tasks; the task runs when named."""
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
        f"def tasks():\n    return [pairs_file_task('PluginSTS', None, {{'test': {str(pairs)!r}}}, default=True)]\n",
        encoding="utf-8",
    )
    papers = PAPERS_STS
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
