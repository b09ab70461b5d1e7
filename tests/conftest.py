"""Shared fixtures (tiny random backbones built once per session, the benchmark data dir) and markers.

Markers show what a test costs; ``make test`` runs them all, ``make test-fast`` leaves these out:

- ``backbone``: loads the packaged default backbone (all-MiniLM-L6-v2). Any other test that tries to
  is failed by the guard below, so no unit test loads real weights by accident.
- ``data``: reads the staged benchmark data (every test using the ``data_dir`` fixture).
- ``subprocess``: spawns Python interpreters (CLI runs, launchers, distributed workers).

They are applied here, by fixture use and by the lists below, and only here: a test file that sets one
with a decorator is refused at collection.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cpu_kinds import CPU_FLAGS_ENV, flags_of, suite_kind
from tiny_models import KINDS, build_tiny_model

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Every CPU-dependent choice sees a simulated CPU (tests/cpu_kinds.py), in this process and the ones it
# spawns: the suite passes alike on every host.
os.environ[CPU_FLAGS_ENV] = flags_of(suite_kind())


def pytest_report_header(config: pytest.Config) -> list[str]:
    """The host's CPU (model and the flags protoembed reads) and the CPU kind the suite simulates."""
    from protoembed.model.precision import CPU_FEATURES, cpu_model, host_cpu_flags

    model = cpu_model()
    host = host_cpu_flags()
    flags = ", ".join(f"{name} {'yes' if name in host else 'no'}" for name in CPU_FEATURES)
    return [f"host CPU: {model} ({flags}, {os.cpu_count()} logical cores)", f"simulated CPU: {suite_kind()}"]


#: Tests (``file::name`` prefixes; a bare file name takes the whole file) that load the default backbone.
BACKBONE_TESTS = (
    "test_cross_encoder.py::test_default_backbone_keeps_its_pooler_and_round_trips",
    "test_embedder.py::test_default_model_equals_sentence_transformers",
    "test_export.py::test_default_model_export_equals_torch",
    "test_mining.py::test_agrees_with_sentence_transformers_on_the_default_model",
    "test_sts_eval.py::test_default_model_matches_sentence_transformers_evaluator",
    "test_readme_snippet.py::test_the_readme_example_runs_and_sentence_transformers_loads_its_model",
    "test_bench_feed_rate.py",  # the default model's tokenizer, in its subprocess
    "test_batching.py::test_the_packaged_default_model_attends_through_sdpa",
)
#: Tests that spawn Python interpreters.
SUBPROCESS_TESTS = (
    "test_training_cli.py::test_train_command_one_process",
    "test_training_cli.py::test_train_command_two_processes",  # also ..._two_processes_cached
    "test_training_cli.py::test_sigterm_stops_cleanly_and_says_how_to_resume",
    "test_distributed.py",
    "test_serve_langchain_hf.py",
    "test_download.py::test_a_new_user_s_data_list_reads_platformdirs",
    "test_cli_encode.py::test_the_process_prints_one_line_and_exits_2",
    "test_encode_corpus.py::test_two_workers_write_the_same_shards_as_one_process",
    "test_encode_corpus.py::test_kill_9_between_shards_then_resume_gives_the_same_bytes",
    "test_encode_ray.py",  # a Ray cluster's processes
    "test_cli_errors.py::test_cli_modules_import_no_torch",
    "test_cli_errors.py::test_a_second_run_on_a_held_folder_is_refused",
    "test_cli_errors.py::test_a_run_killed_by_sigkill_leaves_no_lock_and_resumes",
    "test_cli_errors.py::test_a_full_disk_keeps_the_last_checkpoint_and_resumes",
    "test_cli_errors.py::test_a_real_full_disk_keeps_the_last_checkpoint_and_resumes",
    "test_cli_errors.py::test_ctrl_c_prints_the_resume_command",
    "test_cli_errors.py::test_config_errors_come_before_torch_is_imported",
    "test_experiments_unsup_cpu.py::test_runs_as_a_script",
    "test_experiments_unsup_cpu.py::test_study_runs_each_seed_once_and_resumes",
    "test_objective_plan.py::test_planning_and_config_validation_import_no_torch",
    "test_objectives_supervised.py::test_two_processes_equal_one_process_on_the_concatenated_batch",
    "test_report.py::test_report_and_analyze_commands_load_no_torch",
    "test_readme_tables.py",
    "test_threads.py::test_model_commands_size_torch_s_threads_before_it_loads",
    "test_bench_feed_rate.py",
    "test_bench_gpu_check.py",
    "test_benchmarks_smoke.py",
    "test_docs_site.py",  # mkdocs build
    "test_serve_cli.py::test_a_port_in_use_is_one_line_and_exit_2_before_the_model_loads",
    "test_serve_cli.py::test_a_folder_that_is_not_a_model_is_one_line_and_exit_2",
    "test_serve_cli.py::test_sigterm_answers_the_requests_in_flight_and_exits_0",
    "test_task_entries.py::test_an_installed_plugin_task_changes_no_default_run",
)
#: Fixtures that spawn Python interpreters: every test using one is a ``subprocess`` test too.
SUBPROCESS_FIXTURES = ("run_alone",)
#: The markers this file applies; a test file that sets one itself is refused (one place for them).
APPLIED = ("backbone", "data", "subprocess")


def _listed(item: pytest.Item, names: tuple[str, ...]) -> bool:
    node = f"{Path(str(item.fspath)).name}::{item.name}"
    return any(node.startswith(name if "::" in name else f"{name}::") for name in names)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Add the ``backbone``, ``data`` and ``subprocess`` markers (see the module docstring); refuse a test
    that sets one of them itself. Runs once per session (experiments/tests/conftest.py imports this hook
    too)."""
    if getattr(config, "_protoembed_markers_applied", False):
        return
    config._protoembed_markers_applied = True  # type: ignore[attr-defined]
    own = [
        f"{item.nodeid} (@pytest.mark.{name})"
        for item in items
        for name in APPLIED
        if item.get_closest_marker(name) is not None
    ]
    if own:
        raise pytest.UsageError(
            "markers backbone, data and subprocess are set in tests/conftest.py only (its lists and fixture "
            "rules), not by decorators: " + ", ".join(own)
        )
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if _listed(item, BACKBONE_TESTS):
            item.add_marker(pytest.mark.backbone)
        if "data_dir" in fixtures:
            item.add_marker(pytest.mark.data)
        if _listed(item, SUBPROCESS_TESTS) or any(name in fixtures for name in SUBPROCESS_FIXTURES):
            item.add_marker(pytest.mark.subprocess)


@pytest.fixture(autouse=True)
def _no_hidden_backbone(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail a test not marked ``backbone`` as soon as it resolves the default backbone's folder."""
    if request.node.get_closest_marker("backbone"):
        return
    import protoembed.model.backbones

    def refuse() -> str:
        pytest.fail(
            "this test loads the packaged default backbone: use the tiny models of tests/tiny_models.py, "
            "or list it in BACKBONE_TESTS in tests/conftest.py"
        )

    monkeypatch.setattr(protoembed.model.backbones, "default_model_path", refuse)


@pytest.fixture
def register_tasks():
    """``register_tasks(task, ...)``: add task entries (:func:`protoembed.register_task`) for one test;
    they are removed after it."""
    from protoembed.evaluation.tasks import register_task, unregister_task

    added: list[str] = []

    def add(*tasks):
        for task in tasks:
            added.append(register_task(task).name)

    yield add
    for name in added:
        unregister_task(name)


@pytest.fixture
def one_thread():
    """Tiny models run fastest (and deterministically) on one torch thread, above all on a busy machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``{"bert": dir, "albert": dir, "roberta": dir}`` of tiny random Hugging Face models."""
    root = tmp_path_factory.mktemp("tiny")
    return {kind: build_tiny_model(kind, root / kind) for kind in KINDS}


@pytest.fixture(scope="session", params=KINDS)
def tiny_model_dir(request: pytest.FixtureRequest, tiny_model_dirs: dict[str, Path]) -> Path:
    """Each tiny backbone in turn."""
    return tiny_model_dirs[request.param]


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The benchmark data directory: ``$PROTOEMBED_DATA``, else ``<repo>/../shared/data``.

    Missing data is a failure, never a skip: the data tests are the point of the suite.
    """
    path = Path(
        os.environ.get("PROTOEMBED_DATA") or Path(__file__).resolve().parents[1].parent / "shared" / "data"
    )
    if not path.is_dir():
        pytest.fail(f"benchmark data directory {path} not found: set PROTOEMBED_DATA to the staged data")
    return path
