"""The PyTorch lab (notebook ``06b_lab_pytorch``): the lab's questions on a PyTorch transformer,
with ``torch.save`` and ``torch.distributed.checkpoint`` beside this package's engines.

Importing this package loads no module and no PyTorch; ``results`` reads the recorded comparison
without PyTorch, the others need the optional extra (``pip install -e '.[torch]'``):

* ``train`` — a small decoder-only transformer (RMSNorm, RoPE, grouped-query attention, SwiGLU) with
  AdamW, a warm-up + cosine ``LambdaLR``, a ``DataLoader`` whose sampler's position is state, and the
  torch, NumPy and Python random states;
* ``engines`` — ``torch.save`` (with and without ``fsync``), DCP ``save`` and ``async_save`` behind the
  interface of ``mlsysim.lab.engines``, each with its own loader;
* ``compare`` — every engine on one state in one run, beside the machine's floors and the model, with
  resume and flipped-byte checks;
* ``runner`` — the killable, resumable run (``python -m mlsysim.lab.pytorch.runner``);
* ``results`` — the recorded 1 GB comparison, its targets and the model's prediction.

It imports from the shared core (:mod:`mlsysim.lab`) only; :mod:`mlsysim.lab.distributed` builds on it.
"""
