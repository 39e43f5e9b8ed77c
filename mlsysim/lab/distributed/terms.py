"""The terms the first prediction of the distributed lab leaves out, each measured on this machine, and
the refined prediction built from them (no PyTorch import at module level).

The first prediction (:mod:`mlsysim.lab.distributed.predict`, :func:`mlsysim.checkpoint`) knows three
rates: a memory copy, the disk's write + ``fsync`` and its read. The job does more, and on one machine
its ranks share more than the disk. Each missing term is measured as the floors are
(:func:`mlsysim.lab.floors.measure_floors`: the best, or for the drifting disk the median, of a few
timings in the same run):

======  ======================================================  =====================================
 term   what                                                    measured by
======  ======================================================  =====================================
  C     cores (``os.cpu_count()``)                              the operating system
  c_N   aggregate copy rate of N threads copying at once, in    :func:`parallel_copy_Bps` (one piece a thread
        pieces of a rank's largest tensor                       in the kept runs up to 2026-12-05k); or in
                                                                the job, its ranks' own shards at its end
                                                                (:mod:`.in_job`, ``job_copy_Bps``)
  f_N   the same into memory allocated just before (faults)     :func:`parallel_copy_Bps` (``fresh``)
  F_N   the same into tensors PyTorch has just allocated        :func:`parallel_torch_fresh_Bps`
  n_x   what N processes' new PyTorch tensors cost beyond a     :func:`.probes.new_tensors_s` (the median of one
        copy, all at once, per byte of a rank's tensors, in     per restore round, in the restore job;
        the restore job's memory state (x: ddp, a replica;      ddp in its DDP job, fsdp in its FSDP
        fsdp, a shard)                                          job)
  σ     DCP's staging of the job's state, every rank at once    :func:`.probes.dcp_stage` (median of 3,
        (bytes staged per second), until the last rank is done; in the restore job, at the full size,
        σ_0, until rank 0 is (the stall); σ_s, the same of the  each held while the job trains a gap's
        job at its smallest width, held in d_s                  steps where ``dcp_stage_steps`` says so,
                                                                then back to back in the same job
                                                                (``dcp_stage_back_s``:
                                                                :func:`.results.staged_back_to_back`);
                                                                back to back alone in the kept runs up
                                                                to 2026-12-06b; σ_s in
                                                                :func:`.probes.engine_probe`); or in the
                                                                DCP job itself at its end (:mod:`.in_job`)
  k     this package's CRC-32 (zlib-ng), one core               :func:`~mlsysim.lab.floors.measure_floors`
  p     ``os.write`` into the page cache, one core              :func:`~mlsysim.lab.floors.measure_floors`
  h     the same into memory the host has taken back            :func:`reclaimed_write_Bps` (best of 2)
  W     the disk's write + ``fsync`` of S as it runs (median)   :func:`measure_terms` (write rounds)
  r     a cold read from the disk                               :func:`~mlsysim.lab.floors.measure_floors`
  W_N   the disk's write + ``fsync`` of S, N writers at once,   :func:`.disk.shared_write_Bps` (median of rounds;
        each a new file                                         up to 2026-12-05l, S capped, files rewritten);
                                                                or each engine's job at its end (:mod:`.in_job`)
  r_N   cold reads of N files by N readers at once              :func:`.disk.shared_reads_Bps` (best of two)
  r_1N  cold reads of the same files by each of N readers       :func:`.disk.shared_reads_Bps` (best of two)
  r_S   r_N of the job's own shard files, in the restore job     :func:`.probes.shard_read_s` (the median of one
        between its rounds (the disk drifts from minute to       per restore round)
        minute; the restores are timed there, not where r_N is)
  g     gloo's broadcast from rank 0 to the N − 1 others        :func:`.probes.gloo_probe` (in the restore job)
  g_s   the same of the state's own tensors into tensors the    :func:`.probes.state_bcast_s` (the median of one
        receivers allocate just before (their faults inside)    per restore round, in the restore job)
  q     gloo's point-to-point rate, N/2 pairs at once           :func:`.probes.gloo_probe` (in the restore job)
  M     a file of the memory tier (tmpfs) mapped in place and   :func:`.tier_reads.map_read_Bps` (best of 3)
        read through its CRC-32, one core
  M_N   the same by N processes at once, each a file of a       :func:`.tier_reads.parallel_map_read_Bps`
        rank's bytes (all together)                             (median of 3)
  l     a small collective of gloo (``all_gather_object``)      :func:`.probes.gloo_probe` (best of 5)
  d     ``dcp.async_save`` of the job at its smallest width:    :func:`.probes.engine_probe` (median 5)
        its call (d_s), until durable (d_d) and its cost to     (d_o: of 40 pairs, a save's steps and
        the training steps beside it (d_o), bytes aside         the same steps without it; of 5 up to
                                                                2026-12-08)
  o     this package's ``save`` of the same, its call (o) and   :func:`.probes.engine_probe` (median 5;
        its cost to the steps beside it (o_o)                   o_o as d_o)
  b     each engine's time to durable for those saves beside    :func:`.probes.engine_probe` (median of
        the steps: DCP's (d_b), this package's to the global    40, of 5 up to 2026-12-08)
        record (o_b)
  x     the CPU time of those saves, a rank's process, all its  :func:`.probes.engine_probe` (as d_o)
        threads: DCP's (x_d), this package's (x_o); w_s, DCP's
        writer thread's in them (as w_d)
  z     a small durable write (commit record: write, fsync,     :func:`measure_terms` (median of 5)
        rename, fsync of the directory)
  B     N durable writers beside N busy processes: the          :func:`beside` (per byte)
        writers' seconds and the busy work's loss
  u     the CPU time of N durable writers, user and kernel, as   :func:`beside` (per byte, median of 5)
        the kernel accounts it (page cache, writeback included)
  u_h   the same, each write after the host has taken back     :func:`beside` (per byte, median of 3)
        the memory the last one freed (as h for p)
  u_c   the same, each write a checkpoint's gap after the one  :func:`beside` (per byte, the mean of as
        before (the job's cadence; in the kept runs up to       many as the job's checkpoints since
        2026-12-05d after the same wait), beside N processes    2026-12-06j, its first included; 3 to
        that churn memory at the job's rate between them (N x   40 before: :func:`~.beside.cadence_writes`;
        rank 0's page faults per second in the plain steps)     3 to 12 up to 2026-12-05k, the median
                                                                of 3 up to 2026-12-05e)
  u_f   the same of N writers as DCP's: each file left cached  :func:`beside` (the same; before -06j
        whole, ``fsync`` at its end, the file before deleted    the first write, which frees no file,
        once it is durable (no CRC-32), a write every gap       not counted)
  m     what each of N busy processes loses, on average, while  :func:`beside` (per byte, median of 5)
        the N writers run beside them
  s     the CPU time the host takes from this machine (its      :func:`beside` (per byte, median of 5)
        ``steal``) while the N writers run beside them, less
        the same without the writers: the host's work for them
  ρ     a rank's CPU time in a training step without            the job's own plain steps
        checkpoints, over the step's seconds (its busy share)   (:func:`overhead_per_checkpoint`)
  g     the same of its gloo threads alone (recorded, left      the job's own plain steps
        out of the model: see the concurrent engine below)
  T     process start and rendezvous of a torchrun job, its     the mean of the job's own first start,
        setup and first touch of its buffers                    launch to resume, and a launch of it
                                                                apart (:func:`job_start_s`; the apart
                                                                one alone in the kept runs up to
                                                                2026-12-05i, the job's own alone in
                                                                the CLI's JSON)
  e     the lab's teardown of a lost node: its processes gone,  the driver, per loss (its ``teardown_s``)
        its memory tier erased, before the replacement starts
======  ======================================================  =====================================

**Cores shared.** N ranks run on C cores. CPU work that n threads do at once takes
``share(n) = max(1, n / C)`` times its one-core time; while the N ranks train beside N background
writers, n = 2N. Per-rank work done by all ranks at once is therefore ``share(N)`` times one rank's.

**Which pages new memory gets.** NumPy asks the kernel for huge pages (``madvise``) for a large array, so f_N faults in
2 MB pages; PyTorch's CPU allocator does not, and with transparent huge pages on ``madvise`` (as on the machine the lab
was recorded on) a new tensor faults in 4 KB pages, 512 times as many faults. DCP stages its copy into tensors it
allocates at every save: F_N, not f_N (f_N where F_N was not measured). On a CPU job it copies more than once: its
stager (PyTorch 2.13) deep-copies each DTensor, its local data included, then allocates the staging tensor and copies
into it. σ times that stager on the job's own state, at its size, every rank at once, and stands for F_N where measured
(the restore job's ranks are processes, as the job's are; F_N is timed with threads of one process).

**Which memory the host has taken back.** This machine is a virtual machine that reports free memory to its host
(virtio-balloon free page reporting): Linux hands a free block of 2 MB or more back :data:`RECLAIM_DELAY_S` after it
was freed (sooner where a report is already pending, as other frees make it: the model takes the delay whole, and near
it a run can meet either), and the host must back it again before the guest uses it. The page cache takes such blocks
for a file's pages. This package's writers keep at most 64 MiB of a file cached and reuse those pages (p); DCP's writer
leaves its whole file cached, and the memory the deletion of its older checkpoint freed (once the newer one is durable)
has gone back to the host once the training until the next checkpoint (``gap_s`` less the save's time from its return
to durable) lasts longer than that delay: its write then runs at h, not p.

The refined prediction, for a state of S bytes, R = S/N + E per rank (FSDP), t the CRC-32 inside
``torch.save`` (DCP's writer), and a = 1/f_N − 1/c_N per byte (the page faults of new memory). The
disk is shared too: where the N ranks write or read their shards at once, S / W_N and S / r_N stand
for S / W and S / r (a single reader or writer keeps W and r).

* concurrent: stall = N R / c_N + o (the copy, then this package's fixed cost per call; where the job timed its
  own copy, c_N until rank 0 is done here (N <= C), until the last rank is where N > C and in the overhead: the
  ranks copy at once on shared cores, interleaved, and rank 0's ends with the slowest; the probe's rank 0 came
  out alone or shared, 0.35 to 0.98 times the last rank, in ``-06d`` to ``-07``, the stalls on 4 ranks 0.87 to
  2.45 times the model from it, 0.56 to 1.49 from the last; its own W_N for W_N below, DCP's job its own); durable =
  stall + max(S / W, R (1/k + 1/p) v) + min(S / W, R (1/k + 1/p) v) / m + 2 z + l, v = share(N, C),
  m = ceil(R / 16 MiB): each writer's CPU work runs beside the disk's writeback, which the writer starts
  chunk by chunk (``sync_file_range``), so the longer of the two counts, and of the shorter the part the
  other cannot hide: the device waits for the first chunk's copy, the last chunk's writeback follows every
  copy (a pipeline of m chunks, :func:`mlsysim.lab.store.pipelined_s`; a shard of 16 MiB or less is one
  chunk, its two stages in turn); then the rank's commit record and the global commit, the shard records
  gathered.
  Where o_b was measured, o_b − o (the probe's save after its call, its bytes nothing) stands for
  2 z + l: beside the training's threads each of the save's waits (an ``fsync``, a collective of its
  own) ends when the threads beside it let its own run, which no timing alone shows; timed in the job
  itself beside its own steps (:mod:`.in_job`), where given, rather than beside the smallest job's.
  The writers take the cores first: a writer is always runnable, while the ranks' threads wait for one
  another in every collective, so a rank slowed by a writer holds up the others and leaves its core to
  the writers. N writers on C cores run at C / N of a core each while that is less than one, and the
  ranks run in what is left (the overhead counts what they lose). Overhead per checkpoint
  = N R / c_N + max(o, o_o) + N R (1/k + 1/p) / C (the copy, the engine's fixed cost to the training,
  the writers' CPU time taken from it; max(o, N x_o / C) where x_o was measured: the job at its smallest width
  trains short steps that hold the interpreter's lock, which a save's background work waits for, where the job's
  own steps spend most of their time in products that release it; N ranks' saves take N x_o seconds of CPU from
  the C cores the training runs on). Where :func:`beside` was measured, the busy work's loss (per
  byte, times S) stands for N R (1/k + 1/p) / C: it holds the kernel's own work for the writes (page
  allocation, writeback), which no one-thread rate shows.
  Where u was measured, the writers' CPU time u S stands for N R (1/k + 1/p), in the durable time
  (u S / N times v) and in the overhead: the training loses
  u S / C (N >= C ranks keep every core busy, so each second of CPU a writer takes is a second a rank
  loses, and the job advances at the pace of its C cores; with N < C, the C - N free cores first take
  what they can in the writers' time, and the N ranks lose the rest over their N cores). Ranks that
  wait in a collective leave cycles that the writers take for nothing, so the loss can be smaller. It
  replaces the slowest busy process's loss, a difference of two timings of a few tenths of a second,
  whose noise can exceed the loss itself. Where the gap between checkpoints, less the writes' time to
  durable, is at least :data:`RECLAIM_DELAY_S`, u_h stands for u: the pages each write frees have gone
  back to the host before the next checkpoint, whose writers take them again. Where u_c was measured it stands for
  both, whatever the gap: it is timed beside the job's churn and at the job's own cadence, so its writes meet
  the memory the job's writes meet. Linux hands the pages it frees to the next allocation before the blocks it
  reported to the host (:mod:`~mlsysim.lab.distributed.beside`), and the writers' page-cache allocations meet
  the training's page faults in the kernel's allocator (on a machine whose own writes cost 0.33 ns/B the writers
  beside the job's churn took 1.5 to 4.4 times that CPU time; timed 6 s after the write before, u_c came to 9.2 and
  5.4 times u at 61 MB on 2 and 4 ranks, ``lab_dist-2026-12-05d``, whose jobs checkpoint every 0.67 and 1.5 s, and
  the overheads to 0.28 and 0.55 times the model: the later runs time u_c at the job's cadence). The writes
  take more from the work beside them than the CPU time the guest accounts to them (the host's work
  for the disk and for the pages, the caches). On a virtual machine the host's part is measured as
  such: the CPU time it takes from the guest's cores while the writers run beside busy work (s), so
  the core-seconds the writes take are u S + s S (after the gap u_h S + s S; u_c S + s S where u_c was
  measured). Where s was not measured but m was (the busy processes' mean, steadier than the slowest
  one's), they are m S min(N, C) (+ (u_h − u) S after the gap, or (u_c − u) S). While the writers run (w, the
  durable time's middle term) the max(0, C − N) cores no rank runs on take what they can of the writers' work,
  then of the host's; the rest of the idle ρ leaves, max(0, C − N ρ) − max(0, C − N), is the ranks' waits in
  their collectives, and takes the host's work only (the host reports as stolen only the time a core waits for it
  with work to do; the waits took none of the writers': in the first 13 kept runs where the host took at most
  0.12 s, the ``concurrent`` overheads on 2 ranks came to 1.35 to 1.48 times a model that let them, the median at
  each size, and 1.03 to 1.16 times this one). loss = (taken − what the idle takes) / min(N, C).
  gloo's threads (g, recorded) are left out: their
  CPU time follows the collectives' bytes, not the time a step lasts, and does not grow while the training is
  held up (in a checkpoint's cycle at a gigabyte, +0.07 s on 4 ranks and −0.02 s on 2 where g of a core per
  second would have added 0.33 and 0.18 s; ``benchmarks/records/lab_dist_cpu-2026-12-04.json``);
* dcp-async: stall = N R / F_N + d_s (DCP's fixed cost per call: state dict, plans, threads; N R / σ for N R / F_N here
  and below where σ was measured, and d_s and d_o less σ_s, the probe's own staging: the job's is in N R / σ; in the
  stall N R / σ_0 where σ_0 was measured, the staging until rank 0 alone is done, as the job times its stall: the
  slowest rank's, σ, holds up the global commit and the next step's collective, so the time to durable and the overhead
  keep it); durable = stall + R (1/t + 1/p) v + S / W + d_d (the fixed cost until durable: plans gathered and
  scattered, metadata, the files' ``fsync``; d_b in its place where measured, beside the steps). DCP's writer leaves
  its file in the page cache and calls ``fsync`` at its end: far below the kernel's threshold for background writeback
  (a tenth of the memory, ``dirty_background_ratio``), and long before the pages' 30 s expiry, its bytes go to the disk
  only then, after the CPU work, not beside it. Overhead = N R / F_N + max(d_s, d_o) + N R (1/t + 1/p) / C (d_o: what
  the save's fixed work, its background thread's included, takes from the steps beside it; N (x_d − σ_s /
  share(N) − w_s) / C in its place where x_d was measured, as x_o, its staging in the copy, its writer's cost per
  save in w_d where w_d stands for the writer; w_s, as w_d, from 2026-12-07f); without
  :func:`~.probes.engine_probe`, d_s = 2 l and d_d = 2 z + l. Where the gap between checkpoints, less DCP's time from
  its call's return to durable (the older checkpoint is deleted then, its staging dropped), is at least
  :data:`RECLAIM_DELAY_S`, each rank's write into the page cache costs R (1/h − 1/p) more, in the durable time (times
  v) and in the overhead (N R (1/h − 1/p) / C; where u_h stands for u, less what u_h holds of it, (u_h − u) S / N a
  rank: this package's writer keeps a window of its file cached, so u_h re-backs that window, and DCP's file holds it
  whole. u_c holds none of it: the file DCP leaves cached is memory the job holds beyond what it churns, so the host
  must back it again however the training churns). Where u_f was measured, each rank's write into the page cache is u_f
  R whatever the gap (timed at the job's own cadence, beside its churn: memory freed about the delay before may or may
  not be the host's yet, and the timing meets what the job meets), in place of R / p + R (1/h − 1/p), and the overhead
  takes t + u_f R a rank in place of the writer's u_c S / N; where the job timed its writer thread (w_d, the CPU
  seconds a rank's writer took per checkpoint, :mod:`.in_job`), w_d stands for t + u_f R in the time to durable,
  which waits on that thread alone; the overhead takes the larger. w_d holds the writer's costs per save, not the
  memory its writes took that the training's threads back again (the host took back what DCP freed; the thread that
  touches a page first pays: at a gigabyte on 2 ranks gloo's threads took 0.28 s more CPU per cycle while the
  host reclaimed, 0.09 s while not, ``lab_dist_cpu-2026-12-07``, ``-07b``); the probe's writers back their own pages
  and have no per-save costs (``lab_dist-2026-12-07d``: t + u_f R 1.69, 1.68 times w_d at 1 GB, 0.68, 0.53 at 61 MB);
* sharded restore: max(S / r, share(N) R / k) + share(N) R a + R N / c_N (read, verify, faults, load; S / r_S,
  else S / r_N, for S / r; a, as f_N is timed, of memory the guest still holds: the restores are timed in
  warmed memory, the *Memory* of :mod:`~mlsysim.lab.distributed.restore`; R n_fsdp for share(N) R a where
  measured: the ranks read into tensors PyTorch allocates, in 4 KB pages, and f_N is timed with NumPy's
  huge pages and threads of one process);
* broadcast restore: S / r + S (1/k + a) + S / g_s + R N / c_N (rank 0 reads and verifies, then gloo
  into the tensors the receivers allocate for it: their pages are new, and each one faults in while
  the bytes arrive; S / g where g_s was not measured);
* replicated restore: S / r_1N + share(N) S (1/k + a) + S N / c_N: every rank reads the same file at
  once (the disk serves the first, the page cache the others, as measured), verifies it and copies it
  (S n_ddp for share(N) S a where measured: with more ranks than cores the 4 KB pages of the tensors
  PyTorch allocates for each replica cost more than f_N shows, ``benchmarks/records/lab_readers-2026-12-04.json``);
* peer-memory recovery: R / q + share(N) R max(1/f + 1/k, 1/k + 1/p) + 2 z (1/M for 1/f + 1/k here and
  below where M was measured: the tier's pages are mapped, not copied; the shard mapped, checked
  and sent chunk by chunk; received, checked and written into the replacement's memory tier, committed:
  the receiver takes the next chunk into a second buffer while it writes one, so the sender's work and
  the receiver's overlap and the slower of the two counts, beside the transfer that needs both), then
  read back with its check and loaded: R (1/f + 1/k) share(N) + N R / c_N (N R / M_N for the read back where
  measured: every rank reads its shard back at once, and N at once cost more than their turns, :mod:`.tier_reads`).
  Where the job timed the transfer itself (X seconds a byte, :func:`~mlsysim.lab.distributed.peer.probe_transfer`:
  the lost node's shards sent as a recovery sends them, once the job's last memory checkpoint is complete), the
  lost node's N/2 R bytes times X stand for the transfer's terms: the receivers write into the memory tier
  (``/dev/shm``), not a file's page cache, and on 2 nodes x 2 four processes share the cores: not in the floors;
* storage recovery: the sharded restore;
* downtime per node loss: e + T + recovery. The rendezvous' detection of the dead node (``keep_alive_interval`` x
  ``keep_alive_max_attempt`` of :data:`~mlsysim.lab.distributed.launcher.RDZV_CONF`, :data:`DETECT_S`) runs while the
  replacement agent and the new workers start, and is hidden in T. T is the mean of two launches of the job
  (:func:`job_start_s`): its own first start, taken in the same run just before its losses (a launch right after the
  uninterrupted run's processes ended touches memory freed a moment before, as a restart touches what the loss freed; a
  launch apart may find freed memory the host has taken back, whose first touch cost 27 times as much per byte here:
  ``benchmarks/records/lab_reporting-2026-12-05.json``), and a launch of it apart just before: each is one sample of a
  start that moves by seconds from launch to launch.

>>> t = Terms(cores=2, world=2, copy_Bps=10e9, parallel_copy_Bps=10e9, parallel_fresh_Bps=5e9, fresh_copy_Bps=5e9,
...           crc_Bps=20e9, cache_write_Bps=4e9, write_Bps=1e9, read_cold_Bps=2e9, bcast_Bps=1e9, pair_Bps=1e9)
>>> j = refined_job(t, 1e9, "fsdp")
>>> round(j["concurrent"]["stall_s"], 3), round(j["concurrent"]["durable_s"], 3)   # 0.1 + 1.0 + 0.15 / 30
(0.1, 1.105)
>>> round(j["concurrent"]["overhead_s"], 3)     # 0.1 + 2 x 0.5 GB x (1/20 + 1/4) s/GB / 2 cores
0.25
"""
from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ...checkpoint import EXTRAS_PER_RANK_B
from ...errors import MlsysimError, check_integer, check_positive
from ..store import pipelined_s
from .accounting import overhead_per_checkpoint  # noqa: F401  (re-exported)
from .beside import RECLAIM_DELAY_S, RECLAIM_WAIT_S, beside, steal_s, together_s  # noqa: F401  (re-exported)
from .disk import shared_reads_Bps, shared_write_Bps  # noqa: F401  (re-exported)
from .starts import job_start_s, start_s  # noqa: F401  (re-exported)
from .tier_reads import map_read_Bps, parallel_map_read_Bps  # noqa: F401  (re-exported)

#: the rendezvous' detection of a dead node, seconds: keep_alive_interval (1 s) x keep_alive_max_attempt (2),
#: as :data:`mlsysim.lab.distributed.launcher.RDZV_CONF` sets them
DETECT_S = 2.0
#: the terms in seconds that only dcp-async's figures use (the rest are the writers' and the machine's)
DCP_TERMS = ("torch_crc_s", "reclaimed_write_s", "cached_write_s")
#: each engine's wait before the host has the memory its checkpoint freed, as :func:`refined_job` names it
WAIT_KEYS = {"concurrent": "reclaim_wait_concurrent_s", "dcp-async": "reclaim_wait_dcp_s"}
#: the most bytes :func:`measure_terms` writes for a floor, a copy or a disk rate; the rates are per byte, so
#: larger states scale them (the writers beside busy processes, :func:`beside`, are timed at the job's size)
PROBE_CAP_B = 256e6


def share(threads: int, cores: int) -> float:
    """How much longer CPU work takes when ``threads`` runnable threads share ``cores`` cores.

    >>> share(4, 2), share(1, 2)
    (2.0, 1.0)
    """
    check_integer("threads", threads)
    check_integer("cores", cores)
    return max(1.0, threads / cores)


#: :class:`Terms`' checks: (fields, the least value, whether a field may equal it, what each must be); all finite
_RULES = (
    (("copy_Bps", "parallel_copy_Bps", "parallel_fresh_Bps", "fresh_copy_Bps", "crc_Bps", "cache_write_Bps",
      "write_Bps", "read_cold_Bps"), 0.0, False, "a measured rate > 0 B/s"),
    (("torch_fresh_Bps", "reclaimed_write_Bps", "bcast_state_Bps", "dcp_stage_Bps", "map_read_Bps", "shard_read_Bps",
      "dcp_stage_own_Bps", "parallel_map_read_Bps", "job_copy_Bps", "job_copy_own_Bps", "job_write_Bps",
      "dcp_job_write_Bps"), 0.0, False, "a measured rate > 0 B/s or None"),
    (("own_stall_s", "dcp_durable_beside_s", "own_durable_beside_s", "dcp_stage_small_s", "job_fixed_durable_s",
      "dcp_writer_cpu_s", "dcp_writer_small_cpu_s"), 0.0, True, "a measured time >= 0 s or None"),
    (("dcp_overhead_s", "own_overhead_s", "dcp_overhead_cpu_s", "own_overhead_cpu_s"), -math.inf, False,
     "a measured time in seconds or None"),   # differences
    (("new_tensor_ddp_s_per_B", "new_tensor_fsdp_s_per_B"), -math.inf, False, "measured seconds per byte or None"),
    (("beside_mean_loss_s_per_B", "busy_share", "beside_steal_s_per_B", "gloo_share"), 0.0, True,
     "a measured value >= 0 or None"),
    (("writer_cpu_s_per_B", "writer_cpu_reclaimed_s_per_B", "writer_cpu_churned_s_per_B", "churn_Bps",
      "writer_cpu_cached_s_per_B", "job_peer_transfer_s_per_B"), 0.0, False,
     "measured CPU seconds per byte > 0 or None"),
    (("copy_piece_B",), 0.0, False, "a size > 0 B (a rank's largest tensor) or None"),
    (("shared_write_B",), 0.0, False, "a size > 0 B (the bytes W_N was timed with) or None"))


@dataclass(frozen=True)
class Terms:
    """This machine's measured rates for a job of ``world`` ranks, bytes per second (see the module's
    table); ``start_s``: a torchrun job's start to its resume event, seconds (None: not measured);
    ``copy_piece_B``: the piece c_N and f_N were copied in, a rank's largest tensor (None: one piece a thread,
    as in the kept runs up to 2026-12-05k); ``shared_write_B``: the bytes W_N's writers wrote in all, each a new
    file (None: at most :data:`PROBE_CAP_B`, each round rewriting the files of the one before, as in the kept
    runs up to 2026-12-05l). ``job_*``: the same terms timed in the training job itself once its last checkpoint
    is durable (:mod:`~mlsysim.lab.distributed.in_job`): c_N, until the last rank is done and until rank 0 is
    (``job_copy_Bps``, ``job_copy_own_Bps``), W_N of the ``concurrent`` job (``job_write_Bps``) and of DCP's
    (``dcp_job_write_Bps``), and o_b − o of the ``concurrent`` job, its saves beside the job's own steps
    (``job_fixed_durable_s``, seconds); where given, they stand for the terms timed apart (None: not timed so);
    ``dcp_writer_cpu_s``: w_d, DCP's writer thread's CPU seconds per checkpoint in the job (rank 0's, the mean);
    ``job_peer_transfer_s_per_B``: X, the seconds per byte of the lost node's shards sent from peer memory as a
    recovery sends them, timed in the job (:func:`~mlsysim.lab.distributed.peer.probe_transfer`)."""

    cores: int
    world: int
    copy_Bps: float
    parallel_copy_Bps: float
    parallel_fresh_Bps: float
    fresh_copy_Bps: float
    crc_Bps: float
    cache_write_Bps: float
    write_Bps: float
    read_cold_Bps: float
    sync_s: float = 0.0
    shared_write_Bps: float | None = None
    shared_read_Bps: float | None = None
    same_read_Bps: float | None = None
    bcast_Bps: float | None = None
    pair_Bps: float | None = None
    latency_s: float = 0.0
    dcp_stall_s: float | None = None
    dcp_durable_s: float | None = None
    beside_write_s_per_B: float | None = None
    beside_loss_s_per_B: float | None = None
    torch_crc_Bps: float | None = None
    start_s: float | None = None
    torch_fresh_Bps: float | None = None
    reclaimed_write_Bps: float | None = None
    own_stall_s: float | None = None
    bcast_state_Bps: float | None = None
    writer_cpu_s_per_B: float | None = None
    writer_cpu_reclaimed_s_per_B: float | None = None
    dcp_overhead_s: float | None = None
    own_overhead_s: float | None = None
    dcp_durable_beside_s: float | None = None
    own_durable_beside_s: float | None = None
    beside_mean_loss_s_per_B: float | None = None
    busy_share: float | None = None
    beside_steal_s_per_B: float | None = None
    writer_cpu_churned_s_per_B: float | None = None
    churn_Bps: float | None = None
    dcp_stage_Bps: float | None = None
    dcp_stage_small_s: float | None = None
    gloo_share: float | None = None
    map_read_Bps: float | None = None
    shard_read_Bps: float | None = None
    new_tensor_ddp_s_per_B: float | None = None
    new_tensor_fsdp_s_per_B: float | None = None
    writer_cpu_cached_s_per_B: float | None = None
    dcp_stage_own_Bps: float | None = None
    copy_piece_B: float | None = None
    shared_write_B: float | None = None
    parallel_map_read_Bps: float | None = None
    job_copy_Bps: float | None = None
    job_copy_own_Bps: float | None = None
    job_write_Bps: float | None = None
    dcp_job_write_Bps: float | None = None
    job_fixed_durable_s: float | None = None
    dcp_writer_cpu_s: float | None = None
    job_peer_transfer_s_per_B: float | None = None
    dcp_overhead_cpu_s: float | None = None
    own_overhead_cpu_s: float | None = None
    dcp_writer_small_cpu_s: float | None = None

    def __post_init__(self):
        check_integer("cores", self.cores)
        check_integer("world", self.world)
        for keys, least, equal, what in _RULES:
            for k in keys:
                v = getattr(self, k)
                if v is None and what.endswith("or None"):
                    continue
                if not (isinstance(v, (int, float)) and math.isfinite(v) and (v > least or equal and v == least)):
                    raise MlsysimError(f"{k} must be {what}, got {v!r}")

    def to_dict(self) -> dict:
        return asdict(self)


def parallel_copy_Bps(size_B: float, threads: int, fresh: bool = False, repeats: int = 3,
                      piece_B: float | None = None) -> float:
    """Bytes per second of ``threads`` threads each copying ``size_B / threads`` bytes at once
    (``np.copyto`` releases the GIL), into touched memory or, with ``fresh``, into memory allocated
    just before (its page faults included), in pieces of at most ``piece_B`` bytes (a checkpoint copies a
    state tensor by tensor; None: one piece); the best of ``repeats``.

    The piece matters: glibc's ``memcpy`` writes a copy of at least its non-temporal threshold (3/4 of the
    last-level cache it counts per thread, glibc 2.33 on: commit d3c57027) with streaming stores that skip
    the cache, and a smaller one through the cache, each destination line read before it is written. A
    virtual machine that reports its host's 300 MiB L3 to 2 vCPUs puts the threshold at 118 MB: there one
    thread copied 506 MB at 7.0 GB/s in 16.8 MB pieces (a 1 GB job's largest tensors on 2 ranks) and at 11.1
    in one piece, two threads at 12.8 and 21.0 GB/s (glibc 2.36,
    ``benchmarks/records/lab_copy_pieces-2026-12-05.json``)."""
    check_positive("size_B", size_B)
    check_integer("threads", threads)
    if piece_B is not None:
        check_positive("piece_B", piece_B)
    n = max(int(size_B) // threads, 1)
    step = n if piece_B is None else max(1, min(n, int(piece_B)))
    srcs = [np.full(n, 7, dtype=np.uint8) for _ in range(threads)]
    dsts = [np.zeros(n, dtype=np.uint8) for _ in range(threads)]

    def one(i):
        src, dst = srcs[i], np.empty_like(srcs[i]) if fresh else dsts[i]
        for k in range(0, n, step):
            np.copyto(dst[k:k + step], src[k:k + step])

    return n * threads / _best_together_s(one, threads, repeats)


def _best_together_s(one, threads: int, repeats: int) -> float:
    """The best of ``repeats`` timings of ``threads`` threads running ``one(i)`` at once, i = 0, 1, ..."""
    return min(together_s(one, threads) for _ in range(repeats))


def parallel_torch_fresh_Bps(size_B: float, threads: int, repeats: int = 3) -> float:
    """Bytes per second of ``threads`` threads each copying ``size_B / threads`` bytes at once into a
    tensor that PyTorch's allocator makes just before (``torch.empty``, page faults included), as
    ``dcp.async_save`` stages a state; one intra-op thread each, as the lab's ranks run; the best of
    ``repeats``. Needs PyTorch (imported here, not with the module)."""
    import torch
    check_positive("size_B", size_B)
    check_integer("threads", threads)
    n = max(int(size_B) // threads, 1)
    srcs = [torch.full((n,), 7, dtype=torch.uint8) for _ in range(threads)]
    before = torch.get_num_threads()
    torch.set_num_threads(1)

    def one(i):
        torch.empty(n, dtype=torch.uint8).copy_(srcs[i])

    try:
        return n * threads / _best_together_s(one, threads, repeats)
    finally:
        torch.set_num_threads(before)


def measure_terms(world: int, size_B: float, directory=None, rounds: int = 3, reclaim_wait_s: float = RECLAIM_WAIT_S,
                  churn_Bps: float | None = None, period_s: float | None = None, churn_period_s: float | None = None,
                  copy_piece_B: float | None = None, checkpoints: int | None = None, **measured) -> Terms:
    """Measure the terms for a ``world``-rank job at ``size_B`` bytes (capped at :data:`PROBE_CAP_B`, but for the
    writers beside busy processes, :func:`beside`, and the ``world`` writers at once, W_N, timed at ``size_B``
    itself: the memory their writes take back from the host, and a write's costs that do not grow with its bytes,
    do not scale with them; and the ``world`` readers of the memory tier at once, M_N, each a rank's bytes) in
    ``directory``: the floors, ``rounds`` more write + ``fsync`` timings (the disk's rate is their median; as
    many of W_N, :func:`.disk.shared_write_Bps`), the aggregate copies of ``world`` threads, the page-cache write
    into memory freed ``reclaim_wait_s`` before (:func:`reclaimed_write_Bps`); with ``churn_Bps`` (the memory the
    job's ranks churn, bytes per second) the writers beside it too (u_c, each write started ``churn_period_s``
    after the one before where given: the ``concurrent`` job's gap between checkpoints), and DCP's way (u_f, each
    started ``period_s`` after the one before: the DCP job's gap), else after the wait, as :func:`beside` takes
    them, as many of each as the job's ``checkpoints`` where given; the copies of ``world`` threads in pieces of
    ``copy_piece_B`` (a rank's largest tensor) where given.
    ``measured``: terms measured elsewhere (``bcast_Bps``, ``bcast_state_Bps``, ``pair_Bps``, ``torch_crc_Bps``,
    ``torch_fresh_Bps``, ``start_s``, ``busy_share``)."""
    from ..floors import measure_floors, write_once
    check_integer("world", world)
    check_positive("size_B", size_B)
    size = min(float(size_B), PROBE_CAP_B)
    f = measure_floors(size, directory)
    with tempfile.TemporaryDirectory(dir=directory, prefix="terms-") as tmp:
        data = np.full(int(size), 7, dtype=np.uint8)
        times = [write_once(os.path.join(tmp, f"w{i}.bin"), data) for i in range(rounds)]
        sync = statistics.median(_small_durable_s(Path(tmp) / f"c{i}.json") for i in range(5))
        shared_w = shared_write_Bps(tmp, float(size_B), world, rounds)     # the job's own bytes, new files
        shared_r, same_r = shared_reads_Bps(tmp, size, world)
        b = beside(tmp, float(size_B), world, reclaim_wait_s=reclaim_wait_s, churn_Bps=churn_Bps, period_s=period_s,
                   churn_period_s=churn_period_s, checkpoints=checkpoints)
        reclaimed = reclaimed_write_Bps(tmp, size, wait_s=reclaim_wait_s)
    return Terms(cores=os.cpu_count() or 1, world=world, copy_Bps=f.copy_Bps,
                 parallel_copy_Bps=parallel_copy_Bps(size, world, piece_B=copy_piece_B), copy_piece_B=copy_piece_B,
                 parallel_fresh_Bps=parallel_copy_Bps(size, world, fresh=True, piece_B=copy_piece_B),
                 fresh_copy_Bps=f.fresh_copy_Bps,
                 crc_Bps=f.crc_Bps, cache_write_Bps=f.cache_write_Bps, write_Bps=size / statistics.median(times),
                 read_cold_Bps=f.read_cold_Bps, sync_s=sync, shared_write_Bps=shared_w, shared_write_B=float(size_B),
                 shared_read_Bps=shared_r, same_read_Bps=same_r,
                 beside_write_s_per_B=b["writers_beside_s"] / b["size_B"],
                 beside_loss_s_per_B=b["loss_s"] / b["size_B"], writer_cpu_s_per_B=b["writers_cpu_s"] / b["size_B"],
                 writer_cpu_reclaimed_s_per_B=b["writers_cpu_reclaimed_s"] / b["size_B"],
                 beside_mean_loss_s_per_B=b["mean_loss_s"] / b["size_B"],
                 beside_steal_s_per_B=None if b["steal_s"] is None else b["steal_s"] / b["size_B"],
                 reclaimed_write_Bps=reclaimed, churn_Bps=churn_Bps, map_read_Bps=map_read_Bps(size),
                 parallel_map_read_Bps=parallel_map_read_Bps(float(size_B) / world, world),
                 writer_cpu_churned_s_per_B=None
                 if b["writers_cpu_churned_s"] is None else b["writers_cpu_churned_s"] / b["size_B"],
                 writer_cpu_cached_s_per_B=None
                 if b["writers_cpu_cached_s"] is None else b["writers_cpu_cached_s"] / b["size_B"], **measured)


def reclaimed_write_Bps(directory, size_B: float, repeats: int = 2, wait_s: float = RECLAIM_WAIT_S) -> float:
    """Bytes per second of writing ``size_B`` bytes into the page cache (as p:
    :func:`mlsysim.lab.floors.cache_write_once`, no ``fsync``) into memory freed ``wait_s`` before: a file
    of that size is written, flushed and deleted, then, after the wait, written again and timed (best of
    ``repeats``; the files are removed). On a machine that reports free memory to its host the host has
    taken it back by then and backs every block again; elsewhere this is p."""
    from ..floors import cache_write_once
    check_positive("size_B", size_B)
    check_integer("repeats", repeats)
    if not (0 <= wait_s < math.inf):
        raise MlsysimError(f"wait_s must be a time >= 0 s, got {wait_s!r}")
    data = np.full(int(size_B), 7, dtype=np.uint8)
    best = math.inf
    with tempfile.TemporaryDirectory(dir=directory, prefix="reclaimed-") as tmp:
        path = Path(tmp) / "reclaimed.bin"
        cache_write_once(path, data)
        for _ in range(repeats):
            os.sync()
            path.unlink()
            time.sleep(wait_s)
            best = min(best, cache_write_once(path, data))
    return data.nbytes / best


def _small_durable_s(path) -> float:
    """Seconds of :func:`mlsysim.lab.store.write_durable` of a 200-byte record (a commit record's size)."""
    from ..store import write_durable
    t0 = time.perf_counter()
    write_durable(path, [b"{" + b"0" * 198 + b"}"])
    return time.perf_counter() - t0


def _sizes(t: Terms, size_B: float, mode: str) -> tuple[float, float, float]:
    check_positive("size_B", size_B)
    if mode not in ("fsdp", "ddp"):
        raise MlsysimError(f"mode must be 'fsdp' or 'ddp', got {mode!r}")
    s, n = float(size_B), t.world
    rank = (s / n if mode == "fsdp" else s) + EXTRAS_PER_RANK_B
    return s + n * EXTRAS_PER_RANK_B, rank, n * rank if mode == "fsdp" else rank


def refined_job(t: Terms, size_B: float, mode: str = "fsdp", gap_s: float = 0.0) -> dict:
    """{engine: {stall_s, durable_s, overhead_s}} for the ``concurrent`` engine and ``dcp-async`` (the
    module's formulas), and the terms in seconds (``terms``). dcp-async needs ``torch_crc_Bps``;
    ``gap_s``, the training between two checkpoints (seconds), decides whether an engine's writes take
    memory the host has taken back (``reclaimed_write_Bps`` or u_h measured): the memory a checkpoint
    frees (the older checkpoint's files, deleted once the newer one is durable; DCP's staging, dropped
    with its write) is free from the end of its write, so the wait before the next checkpoint's writes is
    ``gap_s`` less the engine's time from its save's return to durable (``durable_s`` − ``stall_s``, as
    predicted for memory the guest holds), and the host has the memory back where that wait is at least
    :data:`RECLAIM_DELAY_S`. ``terms`` gains each wait (``reclaim_wait_concurrent_s``,
    ``reclaim_wait_dcp_s``) where ``gap_s`` reaches the delay.

    >>> t = Terms(cores=2, world=2, copy_Bps=10e9, parallel_copy_Bps=10e9, parallel_fresh_Bps=5e9,
    ...           fresh_copy_Bps=5e9, crc_Bps=20e9, cache_write_Bps=4e9, write_Bps=1e9, read_cold_Bps=2e9,
    ...           torch_crc_Bps=2e9, reclaimed_write_Bps=1e9)
    >>> j = refined_job(t, 1e9, gap_s=3.0)   # durable 1.005 s (concurrent) and 1.375 s (DCP) after the call
    >>> round(j["terms"]["reclaim_wait_concurrent_s"], 3), round(j["terms"]["reclaim_wait_dcp_s"], 3)
    (1.995, 1.625)
    >>> "reclaimed_write_s" in j["terms"]            # only the concurrent engine's memory is the host's
    False
    >>> round(refined_job(t, 1e9, gap_s=3.5)["terms"]["reclaimed_write_s"], 2)   # DCP's wait 2.125 s: R / h
    0.5
    """
    if not (0 <= gap_s < math.inf):
        raise MlsysimError(f"gap_s must be a time >= 0 s between checkpoints, got {gap_s!r}")
    held = _job(t, size_B, mode, taken_back=False)
    if gap_s < RECLAIM_DELAY_S:                  # no wait reaches the delay
        return held
    waits = {e: gap_s - (f["durable_s"] - f["stall_s"]) for e, f in held.items() if e != "terms"}
    back = {e: w >= RECLAIM_DELAY_S for e, w in waits.items()}
    jobs = {False: held, True: _job(t, size_B, mode, taken_back=True) if any(back.values()) else held}
    out = {e: jobs[b][e] for e, b in back.items()}
    own, dcp = jobs[back["concurrent"]]["terms"], jobs[back.get("dcp-async", back["concurrent"])]["terms"]
    out["terms"] = {**{k: v for k, v in own.items() if k not in DCP_TERMS},
                    **{k: v for k, v in dcp.items() if k in DCP_TERMS},
                    **{WAIT_KEYS[e]: w for e, w in waits.items()}}
    return out


def _job(t: Terms, size_B: float, mode: str, taken_back: bool) -> dict:
    """:func:`refined_job`'s figures with the memory the last checkpoint freed the host's (``taken_back``)
    or the guest's."""
    total, rank, copied = _sizes(t, size_B, mode)
    n, c = t.world, t.cores
    write = total / (t.job_write_Bps or t.shared_write_Bps or t.write_Bps)
    k, p = rank / t.crc_Bps, rank / t.cache_write_Bps
    rho = 1.0 if t.busy_share is None else min(1.0, t.busy_share)    # a rank: one thread that computes
    slowed = share(n, c)                         # the writers take the cores first, the ranks run in the rest
    copy = copied / (t.job_copy_Bps or t.parallel_copy_Bps)          # the slowest rank's copy holds the others
    out = {"terms": {"copy_s": copy, "fresh_copy_s": copied / t.parallel_fresh_Bps,
                     "write_s": write, "crc_s": k, "cache_write_s": p, "share_training": share(2 * n, c),
                     "writers_slowed": slowed}}
    own_copy = (t.job_copy_Bps if n > c else None) or t.job_copy_own_Bps   # sharing cores, they end together
    stall = copied / (own_copy or t.parallel_copy_Bps) + (t.own_stall_s or 0.0)      # copy, fixed cost
    lat = t.latency_s
    cpu_s = (k + p) * slowed                     # the writers' CPU work, N writers on C cores
    loss = n * (k + p) / c
    if t.beside_write_s_per_B is not None:
        loss = t.beside_loss_s_per_B * total
        out["terms"].update(beside_write_s=t.beside_write_s_per_B * total, beside_loss_s=loss)
    churned = t.writer_cpu_churned_s_per_B is not None    # the writes meet the training's churn at every gap
    u_back = taken_back and t.writer_cpu_reclaimed_s_per_B is not None and not churned
    if t.writer_cpu_s_per_B is not None:
        cpu = (t.writer_cpu_churned_s_per_B if churned else t.writer_cpu_reclaimed_s_per_B if u_back
               else t.writer_cpu_s_per_B) * total
        cpu_s = cpu / n * slowed
    writers = pipelined_s(cpu_s, write, rank)    # writeback starts chunk by chunk: the stages overlap
    if t.writer_cpu_s_per_B is not None:         # every CPU second the writers take, a rank on a busy core loses
        taken = cpu                              # core-seconds the writes take from the work beside them
        if t.beside_steal_s_per_B is not None:   # and the host's work for them, stolen from this machine
            taken = cpu + t.beside_steal_s_per_B * total
            out["terms"]["host_taken_s"] = t.beside_steal_s_per_B * total
        elif t.beside_mean_loss_s_per_B is not None:
            taken = t.beside_mean_loss_s_per_B * total * min(n, c) + cpu - t.writer_cpu_s_per_B * total
        spare = max(0.0, c - n) * writers        # cores no rank runs on: the writers' work, then the host's
        waits = (max(0.0, c - n * rho) - max(0.0, c - n)) * writers      # the ranks' waits: the host's only
        own = min(cpu, spare)                    # the writers' work on cores no rank runs on
        idle = own + max(0.0, min(taken - cpu, spare - own + waits))     # then the host's, there and in the waits
        loss = max(0.0, taken - idle) / min(n, c)
        out["terms"].update(writer_cpu_s=cpu, writer_taken_s=taken, idle_taken_s=idle, writer_loss_s=loss)
    out["terms"].update(writers_s=writers, pipeline_fill_s=writers - max(write, cpu_s))
    fixed_o = max(t.own_stall_s or 0.0, t.own_overhead_s or 0.0)     # the engine's fixed cost to training
    if t.own_overhead_cpu_s is not None:         # its CPU, which every rank's core pays (x_o)
        fixed_o = max(t.own_stall_s or 0.0, n * t.own_overhead_cpu_s / c)
    fixed_d = 2 * t.sync_s + lat                 # the commit records, the shard records gathered
    if t.own_durable_beside_s is not None:       # the same, timed beside the training's steps
        fixed_d = max(0.0, t.own_durable_beside_s - (t.own_stall_s or 0.0))
    if t.job_fixed_durable_s is not None:        # beside the job's own steps, not the smallest job's
        fixed_d = t.job_fixed_durable_s
    out["terms"]["fixed_durable_s"] = fixed_d
    out["concurrent"] = {"stall_s": stall, "durable_s": stall + writers + fixed_d,
                         "overhead_s": copy + fixed_o + loss}
    if t.dcp_job_write_Bps:                      # the disk as DCP's own job met it
        out["terms"]["dcp_write_s"] = total / t.dcp_job_write_Bps
    if t.torch_crc_Bps:
        rebacked = (t.writer_cpu_reclaimed_s_per_B - t.writer_cpu_s_per_B) * total if u_back else 0.0
        out["dcp-async"] = _dcp_job(t, out["terms"], rank, copied, taken_back, max(0.0, rebacked), loss)
    return out


def _dcp_job(t: Terms, terms: dict, rank: float, copied: float, taken_back: bool, rebacked: float,
             loss: float) -> dict:
    """dcp-async's figures (the module's formulas): ``terms`` gains DCP's own in seconds; ``rebacked``, what
    ``loss`` holds already of memory backed again (u_h's, where it stands for u: this package's windows)."""
    n, c, lat = t.world, t.cores, t.latency_s
    tc, k, p = rank / t.torch_crc_Bps, terms["crc_s"], terms["cache_write_s"]
    fixed_s = 2 * lat if t.dcp_stall_s is None else t.dcp_stall_s
    small = t.dcp_stage_small_s if t.dcp_stage_Bps and t.dcp_stage_small_s is not None else 0.0
    fixed_s = max(0.0, fixed_s - small)          # its own staging is in the copy, timed at the job's size
    fixed_d = 2 * t.sync_s + lat if t.dcp_durable_s is None else t.dcp_durable_s
    if t.dcp_durable_beside_s is not None:       # timed beside the training's steps
        fixed_d = t.dcp_durable_beside_s
    copy = copied / (t.dcp_stage_Bps or t.torch_fresh_Bps or t.parallel_fresh_Bps)   # its stager's copies
    own = copied / t.dcp_stage_own_Bps if t.dcp_stage_Bps and t.dcp_stage_own_Bps else copy   # rank 0's alone
    terms["torch_crc_s"] = tc
    extra = from_training = tc - k               # torch.save's CRC-32 in place of this package's
    if t.writer_cpu_cached_s_per_B is not None and "writer_cpu_s" in terms:   # u_f, timed at the job's cadence
        terms["cached_write_s"] = t.writer_cpu_cached_s_per_B * rank
        extra += terms["cached_write_s"] - p
        from_training = tc + terms["cached_write_s"] - terms["writer_cpu_s"] / n   # in place of this package's
    if t.dcp_writer_cpu_s is not None and "writer_cpu_s" in terms:   # w_d, its writer thread's clock in the job
        terms["dcp_writer_cpu_s"] = t.dcp_writer_cpu_s
        extra = t.dcp_writer_cpu_s - k - p       # durable waits on that thread alone
        probed = tc + terms["cached_write_s"] if "cached_write_s" in terms else 0.0    # the training loses the larger
        from_training = max(t.dcp_writer_cpu_s, probed) - terms["writer_cpu_s"] / n
    elif t.writer_cpu_cached_s_per_B is None and t.reclaimed_write_Bps and taken_back:   # whole file, memory taken back
        terms["reclaimed_write_s"] = rank / t.reclaimed_write_Bps
        backed = max(0.0, rank / t.reclaimed_write_Bps - p)
        extra += backed
        from_training += max(0.0, backed - rebacked / n)     # u_h re-backed this package's windows only
    cached = (k + p + extra) * terms["writers_slowed"]     # into the page cache; written back only by fsync
    write = terms.get("dcp_write_s", terms["write_s"])
    fixed_o = (t.dcp_overhead_s or 0.0) - small
    if t.dcp_overhead_cpu_s is not None:         # its CPU (x_d), less its staging and, where w_d holds it, its writer's
        writer = (t.dcp_writer_small_cpu_s or 0.0) if "dcp_writer_cpu_s" in terms else 0.0
        fixed_o = n * (t.dcp_overhead_cpu_s - small / share(n, c) - writer) / c
    return {"stall_s": own + fixed_s, "durable_s": copy + fixed_s + cached + write + fixed_d,
            "overhead_s": copy + max(fixed_s, fixed_o) + loss + n * from_training / c}


def refined_restore(t: Terms, scheme: str, size_B: float) -> float:
    """Seconds to restore a ``size_B``-byte state over ``t.world`` ranks with ``scheme`` (the module's
    formulas; ``broadcast`` needs ``bcast_Bps``, and takes ``bcast_state_Bps`` where measured)."""
    n, c = t.world, t.cores
    faults = 1.0 / t.parallel_fresh_Bps - 1.0 / t.parallel_copy_Bps
    if scheme == "sharded":
        total, rank, _ = _sizes(t, size_B, "fsdp")
        new = _new_tensors_s(t.new_tensor_fsdp_s_per_B, rank, share(n, c), faults)
        return (max(total / (t.shard_read_Bps or t.shared_read_Bps or t.read_cold_Bps), share(n, c) * rank / t.crc_Bps)
                + new + n * rank / t.parallel_copy_Bps)
    total, rank, _ = _sizes(t, size_B, "ddp")
    if scheme == "broadcast":
        if not t.bcast_Bps:
            raise MlsysimError("the broadcast restore needs bcast_Bps, gloo's measured broadcast rate")
        return (total / t.read_cold_Bps + rank * (1.0 / t.crc_Bps + max(faults, 0))
                + rank / (t.bcast_state_Bps or t.bcast_Bps)
                + n * rank / t.parallel_copy_Bps)
    if scheme == "replicated":
        new = _new_tensors_s(t.new_tensor_ddp_s_per_B, rank, share(n, c), faults)
        return (total / (t.same_read_Bps or t.read_cold_Bps)
                + share(n, c) * rank / t.crc_Bps + new + n * rank / t.parallel_copy_Bps)
    raise MlsysimError(f"scheme must be one of replicated, sharded, broadcast, got {scheme!r}")


def _new_tensors_s(timed_s_per_B: float | None, rank_B: float, shared: float, faults_s_per_B: float) -> float:
    """A restore's new tensors beyond the copy: as the restore job timed them (n_x) where it did, else NumPy's."""
    return shared * rank_B * max(faults_s_per_B, 0.0) if timed_s_per_B is None else rank_B * max(0.0, timed_s_per_B)


def _mapped_s_per_B(t: Terms) -> float:
    """A memory tier's file mapped and checked, seconds a byte: 1/M where measured, else a copy into new memory and
    a check (1/f + 1/k)."""
    return 1.0 / t.map_read_Bps if t.map_read_Bps else 1.0 / t.fresh_copy_Bps + 1.0 / t.crc_Bps


def peer_transfer_s(t: Terms, size_B: float) -> float:
    """Seconds of a recovery's transfer from peer memory, the lost node's shards sent until all are written: X
    times the lost node's bytes where the job timed it (``job_peer_transfer_s_per_B``), else from gloo's pair rate
    and the two sides' floors (the module's table). Needs ``pair_Bps`` or ``job_peer_transfer_s_per_B``."""
    if not t.pair_Bps and t.job_peer_transfer_s_per_B is None:
        raise MlsysimError("the peer-memory recovery needs pair_Bps, gloo's measured point-to-point rate, or "
                           "job_peer_transfer_s_per_B, the transfer timed in the job")
    _, rank, _ = _sizes(t, size_B, "fsdp")
    if t.job_peer_transfer_s_per_B is not None:               # the transfer as timed in the job: X, the lost bytes
        return t.job_peer_transfer_s_per_B * rank * math.ceil(t.world / 2)
    receiver = 1.0 / t.crc_Bps + 1.0 / t.cache_write_Bps
    return rank / t.pair_Bps + share(t.world, t.cores) * rank * max(_mapped_s_per_B(t), receiver) + 2 * t.sync_s


def refined_recovery(t: Terms, size_B: float, teardown_s: tuple = (0.0, 0.0)) -> dict:
    """Seconds of the FSDP job's recovery after a node loss: ``peer_memory_s`` (:func:`peer_transfer_s`, then every
    rank's shard read back and loaded), ``storage_s`` and, with ``start_s`` measured, the downtime of each
    (``downtime_peer_s``, ``downtime_storage_s``: the lab's teardown of the lost node, ``teardown_s`` for the first
    loss and the second, + the job's start + the recovery). Needs ``pair_Bps`` or ``job_peer_transfer_s_per_B``."""
    if len(teardown_s) != 2 or not all(isinstance(x, (int, float)) and 0 <= x < math.inf for x in teardown_s):
        raise MlsysimError(f"teardown_s must be two finite seconds >= 0 (the first loss's, the second's), "
                           f"got {teardown_s!r}")
    send = peer_transfer_s(t, size_B)
    n, c = t.world, t.cores
    _, rank, _ = _sizes(t, size_B, "fsdp")
    read = (n * rank / t.parallel_map_read_Bps if t.parallel_map_read_Bps      # N at once
            else share(n, c) * rank * _mapped_s_per_B(t))
    back = read + n * rank / t.parallel_copy_Bps
    out = {"peer_memory_s": send + back, "storage_s": refined_restore(t, "sharded", size_B)}
    if t.start_s is not None:
        first, second = teardown_s
        out["downtime_peer_s"] = first + t.start_s + out["peer_memory_s"]
        out["downtime_storage_s"] = second + t.start_s + out["storage_s"]
    return out
