"""Exercises of the checkpoint lab (after notebook 06). Ids 06a.1 onwards.

The machine is a given one (not the reader's), so that every answer is fixed:
memory copy 20 GB/s, disk write with fsync 1.5 GB/s, read 3 GB/s.
"""
from . import Exercise

COPY_BPS, WRITE_BPS, READ_BPS = 20e9, 1.5e9, 3e9
SIZE_B = 1.2e9        # a 100 M-parameter model in fp32 with AdamW: 12 B per parameter


def _machine():
    from ..lab.predict import machine_from
    return machine_from(COPY_BPS, WRITE_BPS, READ_BPS)


def _predict(interval_s):
    from ..lab.predict import predict
    return predict(SIZE_B, _machine(), interval_s)


EXERCISES = [
    Exercise("06a.1", "Predicted sync stall (s) per checkpoint of the 1.2 GB state on the given machine",
             lambda: _predict(10.0).sync_stall_s, rtol=0.03, unit="s",
             hint="predict(SIZE_B, machine_from(20e9, 1.5e9, 3e9), interval_s).sync_stall_s: copy + write."),
    Exercise("06a.2", "Predicted concurrent stall (s) per checkpoint when one is taken every 0.5 s of compute",
             lambda: _predict(0.5).concurrent_stall_s, rtol=0.03, unit="s",
             hint="Two buffers: the copy overlaps the previous write, so the disk takes one checkpoint every "
                  "W seconds; the training waits W minus its compute."),
    Exercise("06a.3", "Shortest compute interval (s) between checkpoints at which the concurrent engine "
             "stalls only for the copy", lambda: _predict(10.0).write_s - _predict(10.0).copy_s, rtol=0.03,
             unit="s", hint="Back-pressure vanishes once the interval plus the copy cover the storage write W."),
    Exercise("06a.4", "Which file makes a checkpoint exist: 'data', 'commit' or 'tmp'?", lambda: "commit",
             hint="A crash may leave a complete data file; only a durable commit record makes it count."),
]
