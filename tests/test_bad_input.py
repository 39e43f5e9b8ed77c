"""Bad input gets a clear error that names the input and the limit."""
import numpy as np
import pytest

import mlsysim as ms


@pytest.mark.parametrize("batch", [0, -1, float("nan"), float("inf"), np.array([1, 0])])
def test_bad_batch(batch):
    with pytest.raises(ValueError, match="batch"):
        ms.roofline("llama-3-8b", "h100", batch=batch)


@pytest.mark.parametrize("eff", [0, -0.1, 1.5, float("nan")])
@pytest.mark.parametrize("name", ["efficiency", "mem_efficiency"])
def test_efficiency_outside_unit_interval(name, eff):
    with pytest.raises(ValueError, match=name):
        ms.roofline("llama-3-8b", "h100", **{name: eff})


def test_bad_context_and_seq_len():
    with pytest.raises(ValueError, match="context_tokens"):
        ms.roofline("llama-3-8b", "h100", context_tokens=-5)
    with pytest.raises(ValueError, match="seq_len"):
        ms.roofline("llama-3-8b", "h100", phase="prefill", seq_len=0)
    with pytest.raises(ValueError, match="decode"):
        ms.roofline("llama-3-8b", "h100", phase="decode", seq_len=16)
    with pytest.raises(ValueError, match="CNN"):
        ms.roofline("resnet-50", "a100", seq_len=16)


def test_unknown_names():
    with pytest.raises(ms.UnknownNameError, match="Did you mean"):
        ms.roofline("llama-3-8", "h100")
    with pytest.raises(ms.UnknownNameError, match="hardware"):
        ms.roofline("llama-3-8b", "h1000")
    with pytest.raises(ms.UnknownNameError, match="phase"):
        ms.roofline("llama-3-8b", "h100", phase="inference")
    with pytest.raises(ms.UnknownNameError, match="precision"):
        ms.roofline("llama-3-8b", "h100", precision="fp12")
    with pytest.raises(ms.UnknownNameError, match="registry"):
        ms.zoo("gpus")


def test_missing_low_precision_peak_is_an_error():
    with pytest.raises(ms.UnknownNameError, match="A100-80GB"):
        ms.roofline("llama-3-8b", "a100", precision="fp8")


def test_bad_records():
    with pytest.raises(ValueError, match="memory_bw_Bps"):
        ms.Hardware(name="x", kind="gpu", peak_flops={"bf16": 1e12}, memory_B=1e9, memory_bw_Bps=0)
    with pytest.raises(ValueError, match="peak_flops"):
        ms.Hardware(name="x", kind="gpu", peak_flops={"bf16": -1}, memory_B=1e9, memory_bw_Bps=1e9)
    with pytest.raises(ValueError, match="layers"):
        ms.Transformer(name="x", layers=0, d_model=64, heads=4, d_ff=128, vocab=10)
    with pytest.raises(ValueError, match="pue"):
        ms.Grid(name="x", region="x", carbon_g_per_kWh=10, pue=0.9)
