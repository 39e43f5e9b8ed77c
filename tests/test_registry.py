import pytest

import mlsysim as ms


def test_registry_sizes():
    assert len(ms.zoo("hardware")) >= 20
    assert len(ms.zoo("models")) >= 15
    assert {"IB-HDR", "IB-NDR", "IB-XDR", "RoCE-400G"} <= set(ms.zoo("fabrics"))
    assert {"DGX-A100", "DGX-H100", "DGX-B200"} <= set(ms.zoo("nodes"))
    assert {"Quebec", "France", "Virginia", "Poland"} <= set(ms.zoo("grids"))


def test_hardware_spans_datacenter_to_microcontroller():
    kinds = {h.kind for h in ms.zoo("hardware", records=True)}
    assert {"gpu", "tpu", "wafer", "soc", "mcu"} <= kinds


@pytest.mark.parametrize("kind", ["hardware", "models", "clusters", "nodes", "fabrics", "grids", "optimizers"])
def test_every_entry_has_source_and_date(kind):
    for rec in ms.zoo(kind, records=True):
        assert rec.source and (getattr(rec, "date", "x") or kind == "clusters"), rec.name


def test_lookup_is_case_insensitive_and_knows_short_names():
    assert ms.hardware("h100") is ms.hardware("H100-SXM") is ms.hardware("h100_sxm")
    assert ms.model("LLAMA-3-8B") is ms.model("llama-3.1-8b")
    assert ms.grid("montreal") is ms.grid("Quebec")


def test_unknown_name_lists_close_matches():
    with pytest.raises(ms.UnknownNameError, match="H100-SXM|h100-sxm"):
        ms.hardware("H100-SMX")
    with pytest.raises(ValueError, match="unknown model"):
        ms.model("gpt-7")


def test_units_converted_at_load():
    h = ms.hardware("H100")
    assert h.peak("bf16") == pytest.approx(989.4e12)
    assert h.memory_bw_Bps == pytest.approx(3.35e12)
    assert h.scaleup_Bps == pytest.approx(450e9)       # 900 GB/s NVLink, both directions
    assert h.host_link_Bps == pytest.approx(64e9)       # PCIe 5 x16, 128 GB/s both directions
    assert ms.hardware("tpu-v4").memory_B == 32 * 2 ** 30


def test_missing_precision_is_an_error_not_a_fallback():
    with pytest.raises(ms.UnknownNameError, match="V100"):
        ms.hardware("v100").peak("bf16")


def test_cluster_from_node_and_preset():
    c = ms.cluster("dgx-h100", nodes=128, fabric="ib-ndr")
    assert c.accelerators == 1024 and c.scaleout_Bps_per_accelerator == pytest.approx(50e9)
    p = ms.cluster("megatron-3072-a100")
    assert p.accelerators == 3072 and p.fabric.name == "IB-HDR"
    assert ms.cluster("dgx-a100").nodes == 1
    assert ms.node("dgx-h100").host_power_W == pytest.approx(10200 - 8 * 700)
    with pytest.raises(ms.UnknownNameError):
        ms.cluster("dgx-z100")


def test_bad_cluster_size():
    with pytest.raises(ValueError, match="nodes"):
        ms.cluster("dgx-h100", nodes=0)


@pytest.mark.parametrize("name, published, tol", [
    ("llama-3-8b", 8.0e9, 0.01), ("llama-3-70b", 70.6e9, 0.01), ("llama-3.1-405b", 405e9, 0.01),
    ("llama-2-7b", 6.74e9, 0.005), ("gpt-3-175b", 175e9, 0.01), ("palm-540b", 540.35e9, 0.001),
    ("megatron-1t", 1008.0e9, 0.001), ("deepseek-v3", 671e9, 0.001),
])
def test_derived_parameter_counts(name, published, tol):
    assert ms.model(name).params == pytest.approx(published, rel=tol)


def test_exact_cnn_counts():
    assert ms.model("resnet-50").params == 25_557_032
    assert ms.model("mobilenetv2").params == 3_504_872
    assert ms.model("resnet-18").params == 11_689_512
    assert ms.model("resnet-50").flops_per_sample == pytest.approx(8.18e9, rel=0.001)


def test_moe_active_parameters():
    assert ms.model("mixtral-8x7b").active_params == pytest.approx(12.9e9, rel=0.01)
    assert ms.model("deepseek-v3").active_params == pytest.approx(37e9, rel=0.02)


def test_kv_cache_per_token():
    # derived values from the validation file: 2·L·n_kv·d_head·2 B, and MLA (512 + 64)·61·2 B
    assert ms.model("llama-2-7b").kv_bytes_per_token() == 512 * 1024
    assert ms.model("llama-3-70b").kv_bytes_per_token() == 320 * 1024
    assert ms.model("llama-3.1-405b").kv_bytes_per_token() == 504 * 1024
    assert ms.model("deepseek-v3").kv_bytes_per_token() == 70_272
    assert ms.model("deepseek-v3").attention == "MLA" and ms.model("palm").attention == "MQA"


def test_custom_transformer_record():
    m = ms.Transformer(name="gpt-1t", layers=128, d_model=25600, heads=160, kv_heads=160, d_ff=4 * 25600,
                       vocab=51200, gated_mlp=False)
    assert m.params == pytest.approx(1.007e12, rel=0.01)
    with pytest.raises(ValueError, match="kv_heads"):
        ms.Transformer(name="bad", layers=2, d_model=96, heads=6, kv_heads=4, d_ff=128, vocab=10)


def test_training_state_zero_convention():
    # ZeRO (Rajbhandari et al. 2020): mixed-precision Adam keeps 16 bytes per parameter.
    m = ms.model("gpt-2")
    s = ms.training_state(m, "adamw", "bf16")
    assert s.total_B == pytest.approx(16 * m.params)
    assert s.checkpoint_B == pytest.approx(14 * m.params)
    assert ms.training_state(m, "sgd", "bf16").optimizer_B == 0
    ada = ms.training_state(m, "adafactor", "bf16").optimizer_B
    assert 0 < ada < 0.1 * 4 * m.params  # factored second moment is tiny
    with pytest.raises(ms.UnknownNameError):
        ms.training_state(m, "adamm")
