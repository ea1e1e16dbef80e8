"""The lab's shared floor: what every analysis of a frozen encoder builds on, whatever its command.

- :mod:`~hire.lab.sources`: which encoder (``--encoder``: a hub name, a folder, a run, a saved model,
  ``random:<encoder>``) and its fingerprint; :mod:`~hire.lab.files`: atomic writes and file hashes.
- :mod:`~hire.lab.features`: a sentence's pooled hidden states (:mod:`~hire.lab.pooling`), encoded once and
  cached; :mod:`~hire.lab.words` and :mod:`~hire.lab.encoding`: each word's hidden states, the word cache.
- :mod:`~hire.lab.options`: the options the lab's commands share, each declared once (encoders, device, cache,
  maximum length, feature encoding); :mod:`~hire.lab.checks`: their checks, before any work (output folder,
  encoders, device).
- :mod:`~hire.lab.results`: ``results.json`` read and written the same way by every lab command, and the machine
  it was made on.

The command packages (``hire.probing``, ``hire.ranking``, ``hire.layers``, ``hire.featurebased``) import from here,
never from one another's command modules; the core library never imports the lab (an import-linter contract).
"""
