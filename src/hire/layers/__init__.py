"""Layer surgery and layer-wise reading of an encoder (Kao et al., *BERT's output layer recognizes all
hidden layers?*).

- :mod:`hire.layers.plan`: which layers a deeper encoder is made of (``--duplicate`` / ``--layers``) and
  the families whose layer lists we know how to rearrange.
- :mod:`hire.layers.deepen`: a deeper encoder by duplicating layers, in memory (:func:`deepen_model`) or
  as an ordinary checkpoint folder (:func:`deepen_checkpoint`, ``hire deepen``), with no training.
- :mod:`hire.layers.reconstruct`: each hidden state fed to the model's own output layer (its masked-LM head,
  or the tied input embeddings), and how many input tokens it gives back (``hire reconstruct``).
- :mod:`hire.layers.tables`: the reconstruction table (Markdown, CSV) and plot, from ``results.json``.
- :mod:`hire.layers.grid`: ``hire reconstruct`` end to end; :mod:`hire.layers.cli`: both commands.

Nothing heavy is imported here: the ``hire`` command registers these commands without loading torch.
"""
