"""Training config files (base includes, --set overrides, unknown keys) and the corpus reader."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from protoembed.core.errors import ProtoembedError
from protoembed.data.training.corpus import read_corpus, resolve_corpus_path
from protoembed.training.config import config_from_dict, dump_config, load_config

REPO = Path(__file__).resolve().parents[1]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


MINIMAL = "objective: {name: simcse}\ndata: {corpus: c.txt}\n"


def test_defaults_and_types(tmp_path):
    cfg = load_config(_write(tmp_path / "a.yaml", MINIMAL + "training: {lr: 1e-5, warmup: 0.1}\n"))
    assert cfg.model == "default" and cfg.max_seq_length == 32 and cfg.head is None
    assert cfg.training.epochs == 1 and cfg.training.eval_steps == 125 and cfg.training.lr == 1e-5
    assert cfg.training.warmup == 0.1 and cfg.objective.options == {}
    assert load_config(tmp_path / "a.yaml", ["training.warmup=100"]).training.warmup == 100
    # the tables' short task names are aliases
    tasks = load_config(
        tmp_path / "a.yaml", ["training.test_tasks=[STS-B, sick-r, STS12]"]
    ).training.test_tasks
    assert tasks == ["STSBenchmark", "SICKRelatedness", "STS12"]


def test_base_includes_merge_and_set_overrides(tmp_path):
    _write(
        tmp_path / "base" / "model.yaml",
        "model: bert-base-uncased\ntraining: {batch_size: 128, lr: 3.0e-5}\n",
    )
    _write(tmp_path / "base" / "method.yaml", "objective: {name: conpvp, denoise: none, temperature: 1e-1}\n")
    child = _write(
        tmp_path / "rows" / "row.yaml",
        "base: [../base/model.yaml, ../base/method.yaml]\n"
        "objective: {denoise: attention_mask}\ndata: {corpus: c.txt}\ntraining: {lr: 1.0e-5}\n",
    )
    cfg = load_config(child, ["objective.anchor=manual", "training.max_steps=7", "output_dir=runs/x"])
    assert cfg.model == "bert-base-uncased" and cfg.training.batch_size == 128 and cfg.training.lr == 1e-5
    assert cfg.objective.name == "conpvp"
    # objective options are validated with the config; 1e-1 (YAML text without a dot) is read as a float
    assert cfg.objective.options == {"denoise": "attention_mask", "temperature": 0.1, "anchor": "manual"}
    assert cfg.training.max_steps == 7 and cfg.output_dir == "runs/x"
    assert load_config(_write(tmp_path / "dump.yaml", dump_config(cfg))) == cfg  # the dump round-trips


@pytest.mark.parametrize(
    ("extra", "overrides", "message"),
    [
        ("modle: x\n", [], "unknown config key 'modle'"),
        ("training: {bacth_size: 8}\n", [], "unknown config key 'training.bacth_size'"),
        ("data: {corpus: c.txt, max_sentence: 3}\n", [], "unknown config key 'data.max_sentence'"),
        ("", ["training.eval_step=5"], "unknown config key 'training.eval_step'"),
        ("", ["training.batch_size=0"], "'training.batch_size': must be at least 1"),
        ("", ["training.lr=fast"], "'training.lr': expected a number"),
        ("", ["training.warmup=1.5"], "fraction of the steps"),
        ("", ["training.eval_variant=tokenised"], "expected senteval or raw"),
        (
            "",
            ["training.test_tasks=[STS17]"],
            "'training.test_tasks': unknown task 'STS17': expected one of STS12",
        ),
        ("", ["head=pooler"], "unknown head 'pooler'"),
        ("", ["training"], "expected KEY=VALUE"),
        ("", ["objective.tau=0.1"], "--set objective.tau=0.1: objective 'simcse': unknown option 'tau'"),
        ("", ["objective.mlp=always"], "option 'mlp': expected train, keep or none, got 'always'"),
        ("", ["objective.name=nope"], "unknown objective 'nope'"),
        ("", ["training.keep_checkpoint=1"], "'training.keep_checkpoint': expected true or false"),
        ("", ["training.epochs=1.5"], "'training.epochs': expected an integer"),
        ("", ["training.lr=.nan"], "'training.lr': expected a finite number"),
        ("", ["data.corpus.x=1"], "'corpus' is not a section"),
    ],
)
def test_config_errors_name_the_key(tmp_path, extra, overrides, message):
    path = _write(tmp_path / "bad.yaml", MINIMAL + extra)
    with pytest.raises(ProtoembedError) as err:
        load_config(path, overrides)
    assert message in str(err.value) and "\n" not in str(err.value)
    # the message names the file, or the --set override that brought the key
    assert str(err.value).startswith("--set" if overrides else str(path))


def test_missing_required_keys_and_include_cycle(tmp_path):
    with pytest.raises(ProtoembedError, match="'objective' is required"):
        load_config(_write(tmp_path / "a.yaml", "data: {corpus: c.txt}\n"))
    with pytest.raises(ProtoembedError, match="'data.corpus' is required"):
        load_config(_write(tmp_path / "b.yaml", "objective: {name: simcse}\n"))
    _write(tmp_path / "x.yaml", "base: y.yaml\n")
    _write(tmp_path / "y.yaml", "base: x.yaml\n")
    with pytest.raises(ProtoembedError, match="include cycle"):
        load_config(tmp_path / "x.yaml")
    with pytest.raises(ProtoembedError, match="not found"):
        load_config(tmp_path / "missing.yaml")


def test_corpus_rules(tmp_path):
    path = _write(tmp_path / "c.txt", "one\n\n  \ntwo  \nthree\nfragm")  # no final newline: cut mid-line
    corpus = read_corpus(path)
    assert (
        corpus.sentences == ["one", "two", "three"] and corpus.empty_lines == 2 and corpus.dropped_last_line
    )
    kept = read_corpus(path, drop_unterminated_last_line=False)
    assert kept.sentences[-1] == "fragm" and not kept.dropped_last_line
    assert read_corpus(path, max_sentences=2).sentences == ["one", "two"]
    terminated = read_corpus(_write(tmp_path / "d.txt", "one\ntwo\n"))
    assert terminated.sentences == ["one", "two"] and not terminated.dropped_last_line
    with pytest.raises(ProtoembedError, match="no usable sentence"):
        read_corpus(_write(tmp_path / "e.txt", "\n \n"))
    with pytest.raises(ProtoembedError, match="no usable sentence"):
        read_corpus(_write(tmp_path / "f.txt", "only a fragment"))


def test_corpus_paths_relative_to_the_data_dir(tmp_path, monkeypatch, data_dir):
    monkeypatch.chdir(tmp_path)
    rel = "unsup/wiki1m_sample/wiki1m_for_simcse.head-1280000B.txt"
    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))
    path = resolve_corpus_path(rel, None)
    assert path == data_dir.resolve() / rel
    wiki = read_corpus(path)
    assert wiki.dropped_last_line and len(wiki.sentences) > 10000  # the byte-cut sample ends mid-sentence
    with pytest.raises(ProtoembedError, match="not found"):
        resolve_corpus_path("unsup/nothing.txt", None)
    # a directory, here or under the data dir, is said to be one (not "not found")
    (tmp_path / "texts").mkdir()
    expected = "a directory; expected one UTF-8 text file, one sentence per line"
    for given, found in (("texts", tmp_path / "texts"), ("unsup", data_dir.resolve() / "unsup")):
        with pytest.raises(ProtoembedError) as info:
            resolve_corpus_path(given, None)
        assert str(info.value) == f"corpus file {found}: {expected}"


def _shipped_configs():
    """Every runnable config (not the base pieces), each expanded into its stages."""
    from protoembed.training.stages import load_run

    paths = [p for p in sorted((REPO / "configs").rglob("*.yaml")) if p.parent.name != "base"]
    return [(path, name, cfg) for path in paths for name, cfg in load_run(path)]


def test_every_shipped_config_is_valid():
    from protoembed.objectives import REGISTRY

    rows = _shipped_configs()
    assert len({path for path, _, _ in rows}) >= 31 + 9 + 9 + 11 + 2
    for path, _, cfg in rows:
        assert cfg.output_dir, path
        assert cfg.objective.name in REGISTRY, path
    staged = {path.name: [name for p, name, _ in rows if p == path] for path, name, _ in rows if name}
    assert staged["sbert-nli-stsb.yaml"] == ["nli", "stsb"]


def test_supervised_cpu_configs_follow_the_paper():
    """SBERT on STS-B: mean head, cosine regression, batch 32, lr 2e-5, 10% warm-up, epochs with no step cap."""
    from protoembed.training.stages import load_run

    [(_, cfg)] = load_run(REPO / "configs" / "cpu" / "sbert-stsb.yaml", ["training.epochs=1"])
    assert (cfg.head, cfg.objective.name) == (None, "cosine_regression")  # the objective's head: mean
    t = cfg.training
    assert (t.epochs, t.max_steps, t.batch_size, t.lr, t.warmup) == (1, None, 32, 2e-5, 0.1)
    nli, stsb = load_run(REPO / "configs" / "bert-base-uncased" / "cnn-sbert-nli-stsb.yaml")
    assert (nli[1].objective.name, nli[1].training.epochs, nli[1].training.batch_size) == (
        "nli_softmax",
        1,
        16,
    )
    assert (stsb[1].objective.name, stsb[1].training.epochs, stsb[1].training.batch_size) == (
        "cosine_regression",
        10,
        32,
    )
    assert nli[1].head == stsb[1].head == "cnn" and stsb[1].training.head_lr == 1e-3


def test_every_shipped_config_builds_its_objective(tiny_model_dirs):
    """Objective names and options of every config are accepted by build_objective (tiny BERT backbone)."""
    import protoembed
    from protoembed.training.components import build_objective_from_config, head_for
    from protoembed.training.stages import load_run

    built = {}
    for path, name, cfg in _shipped_configs():
        matryoshka = cfg.objective.options.get("matryoshka")
        if matryoshka:  # its widths scaled to the tiny backbone's 32 dimensions (384 -> 32, ..., 32 -> 2)
            tiny = ",".join(str(d * 32 // 384) for d in matryoshka["dims"])
            [cfg] = [c for n, c in load_run(path, [f"objective.matryoshka.dims=[{tiny}]"]) if n == name]
        key = (head_for(cfg), repr(sorted(cfg.objective.options.items())), cfg.objective.name)
        if key in built:
            continue
        embedder = protoembed.load(str(tiny_model_dirs["bert"]), head=key[0], max_seq_length=16, device="cpu")
        built[key] = build_objective_from_config(cfg, embedder)
        assert built[key].config()["objective"] == cfg.objective.name
    assert len(built) >= 7 + 5


def test_readme_schema_is_generated_from_the_models():
    """configs/README.md shows schema_yaml() verbatim (regenerate it with the command the README gives)."""
    from protoembed.training.schema import schema_yaml

    readme = (REPO / "configs" / "README.md").read_text(encoding="utf-8")
    block = readme.split("<!-- schema_yaml() -->\n```yaml\n", 1)[1].split("```\n<!-- /schema_yaml() -->", 1)[
        0
    ]
    assert block == schema_yaml()
    # every key of the schema is a key of the models: the generated YAML (minus base) validates
    data = yaml.safe_load(block)
    data.pop("base")
    data["objective"] = {k: v for k, v in data["objective"].items() if k in ("name", "temperature", "mlp")}
    assert data["stages"] == [{"name": "nli"}]
    from protoembed.training.stages import stage_configs

    [(name, staged)] = stage_configs(data, "configs/README.md")
    assert name == "nli" and staged.output_dir == str(Path("runs/NAME") / "nli")
    assert (staged.training.selection, staged.training.test_tasks) == (None, [])  # none by default
    data.pop("stages")
    assert config_from_dict(data).training.test_tasks == []


def test_config_that_is_not_utf8_is_one_line(tmp_path, capsys):
    """A Latin-1 config: the file, its line and the byte offset, exit 2 (no UnicodeDecodeError)."""
    from protoembed.cli import main

    path = tmp_path / "l.yaml"
    path.write_bytes(b"seed: 1\noutput_dir: caf\xe9\n")
    with pytest.raises(
        ProtoembedError, match=rf"^{re.escape(str(path))}:2: expected UTF-8 text \(.* at byte 23\)$"
    ):
        load_config(path)
    assert main(["train", "--config", str(path), "--check"]) == 2
    err = capsys.readouterr().err
    assert err == f"protoembed: error: {path}:2: expected UTF-8 text (invalid continuation byte at byte 23)\n"
