"""What every runtime's model offers: the :class:`SentenceEmbedder` protocol.

:func:`protoembed.load` returns a torch :class:`~protoembed.model.embedder.Embedder` or an exported model
(an :class:`~protoembed.model.export.runtime.ExportedEmbedder` of a registered runtime: :mod:`protoembed.model.runtimes`);
all of them satisfy this protocol, and callers that only encode (the evaluation suites, the analyses,
the export cache, the commands) type against it instead of probing attributes. Only the torch model can
be trained, saved or exported.

A model's vectors are compared by its score function (:data:`SCORE_FUNCTIONS`, its ``similarity_fn_name``:
:func:`score_function_of`), which search (:mod:`protoembed.retrieval.semantic_search`), mining and the
retrieval suite use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from protoembed.core.errors import ProtoembedError

if TYPE_CHECKING:
    import numpy as np
    import torch

    from protoembed.model.encoder import PromptEncoder

#: The similarity functions by name.
SCORE_FUNCTIONS = ("cosine", "dot")
#: The score function of a model that names none (as sentence-transformers' default).
DEFAULT_SCORE_FUNCTION = SCORE_FUNCTIONS[0]


def check_score_function(name: str) -> str:
    """``name`` if it is one of :data:`SCORE_FUNCTIONS`.

    Raises:
        ProtoembedError: any other name.
    """
    if name not in SCORE_FUNCTIONS:
        raise ProtoembedError(
            f"unknown score function {name!r}; expected one of {', '.join(SCORE_FUNCTIONS)}"
        )
    return name


def score_function_of(model: Any) -> str:
    """The model's own score function: its ``similarity_fn_name`` (read from its saved
    ``config_sentence_transformers.json``), else :data:`DEFAULT_SCORE_FUNCTION`."""
    return getattr(model, "similarity_fn_name", None) or DEFAULT_SCORE_FUNCTION


@runtime_checkable
class SentenceEmbedder(Protocol):
    """A model that turns sentences into vectors.

    Attributes:
        encoder: its tokenisation (template, soft-prompt slots, truncation, padding).
        head: the head's registry name (``mean``, ``mask``, ...).
        normalize: whether its vectors are L2-normalised.
        runtime: the registry name of the runtime that runs it (a key of
            :data:`protoembed.model.runtimes.RUNTIMES`: ``torch``, ``onnx``, ``openvino``, ...).
        prompts: its input prompts, name -> text (``query``, ``document``: :mod:`protoembed.inputs.prompts`).
        default_prompt_name: the prompt ``encode`` applies when none is named (``None``: none).
        similarity_fn_name: the score function of its vectors (``cosine``, ``dot``:
            :data:`SCORE_FUNCTIONS`).
        truncate_dim: the width ``encode`` cuts its vectors to when the call names none (``None``: the
            full vector; :func:`protoembed.model.batching.truncate`).
    """

    encoder: PromptEncoder
    head: str
    normalize: bool
    runtime: str
    prompts: dict[str, str]
    default_prompt_name: str | None
    similarity_fn_name: str
    truncate_dim: int | None

    @property
    def precision(self) -> str:
        """What the forward computes in: ``fp32``, ``bf16`` or ``int8``."""
        ...

    @property
    def pooled_dimension(self) -> int:
        """Width of the model's whole vector, before any :attr:`truncate_dim` cut."""
        ...

    @property
    def dimension(self) -> int:
        """Width of the vectors ``encode`` gives by default (:attr:`truncate_dim` when set)."""
        ...

    @property
    def device(self) -> torch.device:
        """Where the features go and the vectors come from."""
        ...

    @property
    def max_seq_length(self) -> int | None:
        """The token budget of the tokenisation."""
        ...

    @property
    def tokenizer(self) -> Any:
        """The Hugging Face tokenizer."""
        ...

    def features(self, sentences: Sequence[str], allow_empty: bool = False) -> dict[str, torch.Tensor]:
        """Tokenise and pad ``sentences`` into one batch."""
        ...

    def encode(
        self,
        sentences: Sequence[str] | str,
        batch_size: int = 64,
        normalize: bool | None = None,
        show_progress_bar: bool | None = None,
        convert_to_tensor: bool = False,
        allow_empty: bool = False,
        precision: str | None = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
        *,
        tokenizer_workers: int | None = None,
        max_tokens_per_batch: int | None = None,
        progress: Any = None,
        truncate_dim: int | None = None,
        vectors: str = "float32",
        ranges: np.ndarray | None = None,
    ) -> np.ndarray | torch.Tensor:
        """Vectors of ``sentences`` in input order: every model type's ``encode`` is
        :meth:`protoembed.model.batching.Encodes.encode` (its arguments described there)."""
        ...
