"""``protoembed encode --engine ray`` and ``protoembed.encode_dataset`` on a local Ray cluster of two
simulated nodes of one CPU each (``ray.cluster_utils.Cluster``, started once for the module): the vectors
and ids of the local encode, a bad line named as locally, a resume on another input refused, an actor
killed mid-run losing and duplicating nothing, a driver killed mid-run resumed to the same bytes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import ray

from protoembed.core.errors import ProtoembedError
from protoembed.corpus import encode_corpus, open_corpus, verify
from protoembed.corpus.manifest import read_manifest
from protoembed.corpus.ray_engine import encode_corpus_on_ray, encode_on_ray, shard_dataset
from tiny_models import CORPUS

TEXTS = [f"{CORPUS[i % 11]} number {i}" if i % 3 else f"short {i}" for i in range(23)]
SETTINGS = {"shard_size": 5, "batch_size": 4, "show_progress": False}


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    nodes.add_node(num_cpus=1)
    ray.init(address=nodes.address, log_to_driver=False)
    yield nodes
    ray.shutdown()
    nodes.shutdown()


@pytest.fixture(scope="module")
def model_dir(tiny_model_dirs) -> str:
    return str(tiny_model_dirs["bert"])


def _inputs(tmp_path: Path) -> dict[str, tuple[Path, dict]]:
    """The same texts as text lines, JSON lines with string ids, and Parquet with integer ids."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "in.txt").write_text("".join(t + "\n" for t in TEXTS), encoding="utf-8")
    lines = [json.dumps({"_id": f"d{i}", "text": t}) for i, t in enumerate(TEXTS)]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    pq.write_table(
        pa.table({"key": [100 + i for i in range(len(TEXTS))], "body": TEXTS}), tmp_path / "in.parquet"
    )
    return {
        "text": (tmp_path / "in.txt", {}),
        "jsonl": (tmp_path / "in.jsonl", {"field": "text", "id_field": "_id"}),
        "parquet": (tmp_path / "in.parquet", {"column": "body", "id_column": "key"}),
    }


def test_ray_gives_the_local_vectors_and_ids(cluster, model_dir, tmp_path):
    for name, (path, options) in _inputs(tmp_path).items():
        local = encode_corpus(model_dir, path, tmp_path / f"local-{name}", **SETTINGS, **options)
        out = tmp_path / f"ray-{name}"
        on_ray = encode_corpus_on_ray(
            model_dir, path, out, **SETTINGS, **options, workers=2, output_format="parquet"
        )
        manifest = verify(out)
        assert manifest.output_format == "parquet" and manifest.input.format == name
        assert [s.name for s in manifest.shards] == [f"shard-0000{i}.parquet" for i in range(5)]
        assert manifest.model_digest == read_manifest(tmp_path / f"local-{name}").model_digest
        np.testing.assert_allclose(np.asarray(on_ray), np.asarray(local), atol=1e-6, rtol=0)
        assert on_ray.ids().tolist() == local.ids().tolist()
    assert open_corpus(tmp_path / "ray-jsonl").ids().tolist() == [f"d{i}" for i in range(len(TEXTS))]
    assert open_corpus(tmp_path / "ray-parquet").ids().tolist() == [100 + i for i in range(len(TEXTS))]


def test_each_shard_is_a_block_of_its_own_so_every_actor_has_work(cluster, model_dir, tmp_path):
    """Ray merges a read task's small blocks into one unless told not to, and one block goes to one
    actor: the 5 shards must reach the actors as 5 blocks."""
    path, _ = _inputs(tmp_path)["text"]
    seen: dict[str, int] = {}

    def runner(spec, job, scanned, resume, workers):
        blocks = shard_dataset(job, [0, 1, 2, 3, 4]).materialize()
        seen["blocks"] = blocks.num_blocks()
        seen["rows"] = blocks.count()
        return encode_on_ray(spec, job, scanned, resume, None, workers, 0)

    encode_corpus(model_dir, path, tmp_path / "out", **SETTINGS, runner=runner, workers=2)
    assert seen == {"blocks": 5, "rows": 5}
    assert ray.data.DataContext.get_current().target_max_block_size > 1  # the user's context untouched


def test_encode_dataset_adds_the_model_s_vectors(cluster, model_dir):
    import protoembed

    ds = ray.data.from_items([{"text": t, "n": i} for i, t in enumerate(TEXTS)])
    rows = protoembed.encode_dataset(ds, model_dir, batch_size=4, normalize=True).take_all()
    expected = protoembed.load(model_dir).encode(TEXTS, batch_size=4, normalize=True)
    got = {row["n"]: np.asarray(row["embedding"]) for row in rows}
    assert sorted(got) == list(range(len(TEXTS)))
    np.testing.assert_allclose(np.stack([got[i] for i in range(len(TEXTS))]), expected, atol=1e-6, rtol=0)


def test_a_bad_line_and_another_input_are_refused_as_locally(cluster, model_dir, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a"}\n{"text": 3}\n', encoding="utf-8")
    with pytest.raises(ProtoembedError) as caught:
        encode_corpus_on_ray(model_dir, bad, tmp_path / "o", field="text")
    assert str(caught.value) == f"{bad}:2: field 'text': expected a string, got 3"
    path, _ = _inputs(tmp_path)["text"]
    out = tmp_path / "out"
    encode_corpus_on_ray(model_dir, path, out, **SETTINGS, output_format="parquet")
    other = tmp_path / "other.txt"
    other.write_text("".join(t + "\n" for t in reversed(TEXTS)), encoding="utf-8")
    with pytest.raises(ProtoembedError, match="cannot resume: the input's texts differ"):
        encode_corpus_on_ray(model_dir, other, out, **SETTINGS, output_format="parquet", resume=True)
    with pytest.raises(ProtoembedError, match=r"settings.batch_size: recorded 4, now 2"):
        encode_corpus_on_ray(
            model_dir,
            path,
            out,
            **{**SETTINGS, "batch_size": 2},
            output_format="parquet",
            resume=True,
        )


def _long_input(tmp_path: Path, rows: int) -> Path:
    path = tmp_path / "long.jsonl"
    lines = [json.dumps({"_id": f"k{i}", "text": f"{CORPUS[i % 11]} {i}"}) for i in range(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _shards_done(out: Path) -> int:
    try:
        manifest = read_manifest(out)
    except ProtoembedError:  # read while being replaced
        return 0
    return 0 if manifest is None else len(manifest.shards)


def _actor_pids() -> list[int]:
    """The processes of the encoding actors (Ray names them after their class)."""
    found = subprocess.run(["pgrep", "-f", "MapWorker"], capture_output=True, text=True).stdout.split()
    return [int(pid) for pid in found]


def test_a_killed_actor_is_retried_and_every_id_is_written_once(cluster, model_dir, tmp_path):
    src = _long_input(tmp_path, 400)
    reference = encode_corpus(model_dir, src, tmp_path / "ref", field="text", id_field="_id", shard_size=2)
    out = tmp_path / "out"
    run = {"shard_size": 2, "field": "text", "id_field": "_id", "workers": 2}
    result: dict = {}
    thread = threading.Thread(
        target=lambda: result.update(
            v=encode_corpus_on_ray(model_dir, src, out, output_format="parquet", **run)
        )
    )
    thread.start()
    deadline = time.monotonic() + 120
    while _shards_done(out) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = _actor_pids()
    assert pids and _shards_done(out) < 200, "the run ended before an actor could be killed"
    os.kill(pids[0], signal.SIGKILL)
    thread.join(timeout=300)
    vectors = result["v"]
    ids = vectors.ids().tolist()
    assert sorted(ids) == sorted(f"k{i}" for i in range(400)) and len(set(ids)) == 400
    assert ids == reference.ids().tolist()
    np.testing.assert_allclose(np.asarray(vectors), np.asarray(reference), atol=1e-6, rtol=0)


def test_a_killed_driver_resumes_from_the_shards_written(cluster, model_dir, tmp_path):
    src = _long_input(tmp_path, 400)
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "protoembed", "encode", str(src), "-o", str(out), "--model", model_dir]
    argv += ["--field", "text", "--id-field", "_id", "--shard-size", "2", "--engine", "ray"]
    argv += ["--address", cluster.address, "--no-progress"]
    driver = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while _shards_done(out) < 5 and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.05)
    driver.kill()
    driver.wait()
    written = {s.name: s.sha256 for s in read_manifest(out).shards}
    assert 5 <= len(written) < 200 and not read_manifest(out).complete
    resumed = encode_corpus_on_ray(
        model_dir,
        src,
        out,
        field="text",
        id_field="_id",
        shard_size=2,
        output_format="parquet",
        resume=True,
    )
    manifest = verify(out)
    assert {s.name: s.sha256 for s in manifest.shards if s.name in written} == written  # kept, not redone
    reference = encode_corpus(model_dir, src, tmp_path / "ref", field="text", id_field="_id", shard_size=2)
    assert resumed.ids().tolist() == reference.ids().tolist()
    np.testing.assert_allclose(np.asarray(resumed), np.asarray(reference), atol=1e-6, rtol=0)
