"""The model: a backbone, its input module and a head, loaded, saved, exported and run.

- :mod:`~protoembed.model.backbones`: a model spec -> a local folder -> (tokenizer, Hugging Face encoder);
- :mod:`~protoembed.model.encoder`: :class:`~protoembed.model.encoder.PromptEncoder`, the input module
  (tokenizer, backbone, template, soft prompt);
- :mod:`~protoembed.model.heads`: the head registry and the pooling modules;
- :mod:`~protoembed.model.embedder`: :class:`~protoembed.model.embedder.Embedder` = encoder + head, its
  ``encode`` (:mod:`~protoembed.model.batching`, the loop every runtime shares) and ``save``;
- :mod:`~protoembed.model.model_spec`, :mod:`~protoembed.model.precision`: the model settings a user gives;
- :mod:`~protoembed.model.loading`: ``protoembed.load``;
- :mod:`~protoembed.model.protocol`: what every runtime's model offers, and its score functions;
- :mod:`~protoembed.model.runtimes`, :mod:`~protoembed.model.export`: the runtime registry, the export
  formats and the exported models;
- :mod:`~protoembed.model.model_card`: the ``README.md`` of a saved model.

Nothing is imported here, so ``protoembed.model.<module>`` loads only what it needs (torch only where a
module computes).
"""
