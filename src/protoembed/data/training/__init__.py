"""The training data formats: a reader per format (:data:`protoembed.data.training.formats.FORMATS`), each
turning a file into :class:`~protoembed.data.training.examples.Examples` with the objective's columns."""
