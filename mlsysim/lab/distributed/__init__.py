"""The distributed lab (notebook ``06c_lab_distributed``): a ``torchrun`` job whose ranks checkpoint
their shards under a global commit, into memory, a peer node's memory and durable storage.

Importing this package loads no module and no PyTorch. Only the two programs that ``torchrun``
starts import it:

* ``worker`` — one rank of the job (``-m mlsysim.lab.distributed.worker``): FSDP2 or DDP on gloo,
  this package's engines or DCP, resume, reshard, the memory tiers;
* ``restore`` — the three ways of restoring (replicated, sharded, broadcast), with the bytes each
  rank reads (``-m mlsysim.lab.distributed.restore``).

The rest runs without PyTorch:

* ``launcher`` — starts ``torchrun`` agents from Python, kills ranks and nodes, resumes, reshards and
  returns the run's record with its prediction;
* ``checks`` — the engines, modes and kills the lab accepts, and its refusals;
* ``shards`` — the sharded store: partition metadata, shard records, the global commit;
* ``tiers`` — where checkpoints live: each node's memory, a peer's replica, durable storage, and the
  recovery plan;
* ``predict`` — what :func:`mlsysim.checkpoint` predicts for the job on this machine;
* ``terms`` — the terms that prediction leaves out, measured here, and the refined prediction;
* ``refine`` — those terms measured for one run of the job, and its figures predicted with them
  (``mlsysim lab distributed --refined``);
* ``probes`` — each engine's fixed costs per save, timed inside the restore job;
* ``beside`` — writers beside busy processes and beside the memory the training churns, and the host's part;
* ``disk`` — the disk shared by N ranks: N writers of new files at once, N readers at once;
* ``tier_reads`` — the memory tier read back in place, by one process and by N at once;
* ``accounting`` — each thread's and the machine's CPU time per step, and where a checkpoint's cost goes;
* ``results`` — the recorded full-size benchmarks and their targets.

Imports go one way: from the shared core (:mod:`mlsysim.lab`) and :mod:`mlsysim.lab.pytorch`, never
back.
"""
