"""What protoembed writes, and how: the names and files of its folders, and the safe way to write them.

- :mod:`~protoembed.outputs.io`: atomic files and folders (built under a temp name, then renamed);
- :mod:`~protoembed.outputs.folder_lock`: one run per output folder (an OS lock);
- :mod:`~protoembed.outputs.st_layout`: a saved model's sentence-transformers files (``modules.json``, ...);
- :mod:`~protoembed.outputs.run_layout`: the names inside a training run's folder (``best/``,
  ``results.json``, ...; public as ``protoembed.run_layout``).

An export folder's names are the export's own (:mod:`protoembed.model.export.layout`), as its format is
the runtime registry's. No torch.
"""
