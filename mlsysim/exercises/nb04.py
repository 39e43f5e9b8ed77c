"""Exercises of notebook 04 (starving the GPU: input pipelines)."""
from ..datapipe import datapipe, host
from . import Exercise


def achieved_fraction() -> float:
    """Measured ResNet-50 training throughput on one A100 over its roofline bound (validation case)."""
    from ..validation import datapipe as cases
    case = {c.id: c for c in cases.CASES}["dle-resnet50-a100"]
    return case.published / case.predict()


def _resnet(hardware: str, **kw):
    eta = achieved_fraction()
    return datapipe("resnet-50", hardware, batch=256, efficiency=eta, mem_efficiency=eta, **kw)


EXERCISES = [
    Exercise("04.1", "FFCV workers (hardware threads) needed to keep one H100 fed with ResNet-50 training "
             "(batch 256, achieved fraction as measured on the A100)",
             lambda: _resnet("h100").workers_needed, rtol=0.0,
             hint="The accelerator's images/s divided by one thread's images/s, rounded up."),
    Exercise("04.2", "If ResNet-50 training ran at its roofline bound on an H100 (batch 256), what fraction of "
             "time would each GPU of a DGX H100 compute with one FFCV worker per hardware thread?",
             lambda: datapipe("resnet-50", "h100", batch=256,
                              workers=int(host("dgx-h100").threads_per_accelerator)).utilization,
             rtol=0.02, hint="Delivered images/s over what the GPU could consume."),
    Exercise("04.3", "ResNet-50 training on an A100 at its roofline bound reads ImageNet JPEG files one by one "
             "from S3 with 64 decode workers: which stage bounds it, 'storage', 'cpu', 'link' or "
             "'accelerator'?",
             lambda: datapipe("resnet-50", "a100-80gb", batch=256, pipeline="imagenet-jpeg-decode", workers=64,
                              storage="s3").bound,
             hint="S3 serves a limited number of GET requests per second per key prefix."),
    Exercise("04.4", "Cores needed to tokenize on the fly (Hugging Face tokenizers) for GPT-2 training on an "
             "H100 at the roofline bound (batch 16, 1,024-token sequences)",
             lambda: datapipe("gpt-2", "h100", batch=16, seq_len=1024,
                              pipeline="text-hf-tokenizers").workers_needed, rtol=0.0,
             hint="Tokens per second the GPU consumes, over tokens per second one core produces."),
    Exercise("04.5", "Storage read rate (B/s) that GPT-2-XL training on an H100 needs from pre-tokenized shards "
             "(batch 8, 1,024-token sequences, at the roofline bound)",
             lambda: datapipe("gpt-2-xl", "h100", batch=8, seq_len=1024).input_Bps, rtol=0.02, unit="B/s",
             hint="Tokens per second times 2 bytes per token (GPT-2's vocabulary fits in 16 bits)."),
]
