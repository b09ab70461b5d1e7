"""What goes into a model, before any model is loaded: the inputs' checks and how a text is prompted.

- :mod:`~protoembed.inputs.checks`: the checks of the arguments a user passes (sentences, counts, batch
  sizes, devices), each a one-line error;
- :mod:`~protoembed.inputs.prompts`: a model's input prompts (``query`` / ``document``), the one rule that
  puts them before an input;
- :mod:`~protoembed.inputs.templates`: templates with a sentence slot ``<S>`` and a ``[MASK]`` slot
  (PromptBERT, ConPVP), their rendering and piecewise tokenisation;
- :mod:`~protoembed.inputs.template_sets`: ConPVP's packaged positive / negative template sets.

No torch.
"""
