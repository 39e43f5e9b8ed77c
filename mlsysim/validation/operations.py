"""Energy, carbon and cost of published training runs against the sustainability and economics models."""
from __future__ import annotations

from ..economics import rental_usd, training_run
from ..registry import cluster, fabric, hardware
from ..sustainability import carbon_kg, embodied_kg, emissions_kg, energy_kwh, footprint, node_power_W
from ..systems import Cluster, Grid, Node
from ..units import GB, Gbps
from . import Case

# --- BLOOM (Luccioni, Viguier & Ligozat, JMLR 2023, Table 1 and §4) ---------------------------
BLOOM_GPU_HOURS = 1_082_990
BLOOM = cluster("bloom-384-a100")
BLOOM_HOURS = BLOOM_GPU_HOURS / BLOOM.accelerators
BLOOM_SOURCE = ("Luccioni, Viguier & Ligozat, Estimating the Carbon Footprint of BLOOM, JMLR 24 (2023): "
                "1,082,990 A100-hours at 400 W = 433,196 kWh; 57 gCO2e/kWh; dynamic 24.69 t, embodied 11.2 t")

# --- GPT-3 (Patterson et al., Carbon Emissions and Large Neural Network Training, 2021, Table 4) --
# 10,000 V100s for 14.8 days (3.552 M processor-hours), PUE 1.10, 0.429 kgCO2e/kWh: 1,287 MWh, 552 t.
# The V100 servers are modelled as DGX-1 nodes (8 x V100 SXM2, 3,500 W maximum system power,
# 512 GB, 4 x 100 Gb/s EDR: NVIDIA DGX-1 with Tesla V100 datasheet, 2017).
DGX1 = Node(name="DGX-1 (V100)", accelerator=hardware("v100"), accelerators=8, host_memory_B=512 * GB,
            system_power_W=3500, nics=4, nic_Bps=100 * Gbps, default_fabric="IB-EDR",
            source="NVIDIA DGX-1 with Tesla V100 datasheet (V)", date="2017-09")
GPT3 = Cluster(name="GPT-3 (10,000 V100)", node=DGX1, nodes=1250, fabric=fabric("ib-edr"))
GPT3_HOURS = 14.8 * 24
GPT3_GRID = Grid(name="GPT-3 datacentre", region="Microsoft U.S. (Patterson et al. 2021)",
                 carbon_g_per_kWh=429, pue=1.10, wue_L_per_kWh=0.0, source="Patterson et al. 2021, Table 4",
                 date="2021-04")
PATTERSON_SOURCE = ("Patterson et al., Carbon Emissions and Large Neural Network Training, arXiv:2104.10350 "
                    "(2021), Table 4: GPT-3, 10,000 V100, 14.8 days, 330 W per processor, PUE 1.10, 1,287 MWh, "
                    "0.429 kgCO2e/kWh, 552 tCO2e")

# --- Llama model cards: GPU-hours x TDP, location-based tCO2eq --------------------------------
META_PUE = 1.08   # Meta fleet PUE (DatacenterDynamics 2024); the cards adjust TDP for PUE
LLAMA_CARDS = {
    "Llama-2": ("A100-80GB", 3_311_616, 539.0,
                "Llama 2 model card (meta-llama, 2023-07): 3,311,616 A100-80GB GPU-hours at 400 W, 539 tCO2eq"),
    "Llama-3": ("H100-SXM", 7.7e6, 2290.0,
                "Meta Llama 3 model card (2024-04): 7.7 M H100-80GB GPU-hours at 700 W, 2,290 tCO2eq location-based"),
    "Llama-3.1": ("H100-SXM", 39.3e6, 11390.0,
                  "Llama 3.1 model card (2024-07): 39.3 M H100-80GB GPU-hours at 700 W, 11,390 tCO2eq location-based"),
}
LLAMA_NOTE = ("Meta does not publish the grid factor. GPU-hours x TDP x PUE 1.08 x the 2023 U.S. average "
              "(369.5 g/kWh) lands within a few per cent; the gap is Meta's own mix of sites and years.")


def _llama_t(device: str, gpu_hours: float) -> float:
    one = cluster("dgx-a100" if device.startswith("A100") else "dgx-h100", nodes=1)
    kwh = energy_kwh(one, hours=gpu_hours / one.accelerators, utilization=1.0, scope="accelerators")
    return float(emissions_kg(kwh * META_PUE, "usa")) / 1e3


# --- DeepSeek-V3 (Technical Report arXiv:2412.19437, Table 1 and §1) --------------------------
DEEPSEEK_SOURCE = ("DeepSeek-V3 Technical Report (2024): 2.788 M H800 GPU-hours at $2/GPU-hour = $5.576 M; "
                   "180 K H800 GPU-hours per trillion tokens, 3.7 days on 2,048 H800s")


def _deepseek_bound_gpu_hours() -> float:
    """GPU-hours per trillion tokens at 100 % of the H800's dense bf16 peak (a lower bound)."""
    h800 = Cluster(name="2,048 H800", node=Node(name="HGX H800", accelerator=hardware("h800"), accelerators=8,
                                                host_memory_B=2000 * GB, system_power_W=10200, nics=8,
                                                nic_Bps=400 * Gbps, source="as DGX H100", date="2023-03"),
                   nodes=256, fabric=fabric("ib-ndr"))
    return training_run("deepseek-v3", h800, 1e12, mfu=1.0, seq_len=4096).accelerator_hours


GCP_SOURCE = ("mlco2/codecarbon data/cloud/impact.csv (Google Cloud region carbon data): "
              "northamerica-northeast1 2, europe-west9 34, us-east4 322, europe-central2 723 gCO2e/kWh")

CASES = [
    Case(id="V23-energy", area="operations", title="BLOOM training energy, GPU-hours at A100 TDP (kWh)",
         published=433_196.0, unit="kWh",
         predict=lambda: energy_kwh(BLOOM, hours=BLOOM_HOURS, utilization=1.0, scope="accelerators"),
         tolerance=0.02, source=BLOOM_SOURCE),
    Case(id="V23-carbon", area="operations", title="BLOOM dynamic carbon on the French grid (kgCO2e)",
         published=24_690.0, unit="kgCO2e",
         predict=lambda: carbon_kg(BLOOM, hours=BLOOM_HOURS, grid="france", utilization=1.0, pue=1.0,
                                   scope="accelerators"),
         tolerance=0.05, source=BLOOM_SOURCE,
         note="The registry holds France's 2023 average, 56 g/kWh; the paper used 57 g/kWh."),
    Case(id="V23-embodied", area="operations", title="BLOOM embodied carbon, 48 nodes for 2,820 h (kgCO2e)",
         published=11_200.0, unit="kgCO2e", predict=lambda: embodied_kg(BLOOM, hours=BLOOM_HOURS),
         tolerance=0.02, source=BLOOM_SOURCE),
    Case(id="V25-cost", area="operations", title="DeepSeek-V3 training cost at $2 per H800-hour (USD)",
         published=5.576e6, unit="USD", predict=lambda: rental_usd(2.788e6, "deepseek-h800"),
         tolerance=0.001, source=DEEPSEEK_SOURCE),
    Case(id="V25-gpu-hours", area="operations",
         title="DeepSeek-V3 H800-hours per trillion tokens (bound at 100 % of bf16 peak)",
         published=180e3, unit="GPU-h", predict=_deepseek_bound_gpu_hours, kind="bound", direction="lower",
         tolerance=0.65, source=DEEPSEEK_SOURCE,
         note="At full dense bf16 peak the 37 B active parameters need about 70 K GPU-hours per trillion "
              "tokens; 180 K means about 40 % of the bf16 peak (FP8 GEMMs run at twice that peak, so 20 % of "
              "it), consistent with the overlapped all-to-all and pipeline costs the report describes."),
]

CASES += [
    Case(id=f"V26-{region}", area="operations", title=f"1 MWh drawn in {region} (GCP {zone}) (kgCO2e)",
         published=published, unit="kgCO2e", predict=lambda region=region: emissions_kg(1000.0, region),
         tolerance=0.001, source=GCP_SOURCE)
    for region, zone, published in [("montreal", "northamerica-northeast1", 2.0), ("paris", "europe-west9", 34.0),
                                     ("ashburn", "us-east4", 322.0), ("warsaw", "europe-central2", 723.0)]
]

CASES += [
    Case(id="GPT3-power", area="operations",
         title="GPT-3 training: system power per V100, host share included (W)", published=330.0, unit="W",
         predict=lambda: node_power_W(GPT3, "training") / DGX1.accelerators, tolerance=0.10,
         source=PATTERSON_SOURCE,
         note="Measured H100-node calibration (idle floor 18 % of TDP, u = 0.84, host at 63 % of its "
              "rating) carried to a V100 node: 260 W per GPU plus 86 W of host, 5 % above the measured mean."),
    Case(id="GPT3-energy", area="operations",
         title="GPT-3 training energy, 10,000 V100 for 14.8 days, PUE 1.10 (kWh)", published=1_287_000.0,
         unit="kWh",
         predict=lambda: footprint(GPT3, hours=GPT3_HOURS, grid=GPT3_GRID, offsite_L_per_kWh=0.0,
                                   embodied_kg_per_node=0.0).energy_kWh,
         tolerance=0.10, source=PATTERSON_SOURCE,
         note="The node model (linear GPU curve, measured host share, training utilisation from H100 "
              "measurements) gives 346 W per V100 with its host share against the 330 W Patterson et al. "
              "report, a 5 % overestimate carried into energy and carbon."),
    Case(id="GPT3-carbon", area="operations", title="GPT-3 training carbon at 0.429 kgCO2e/kWh (kgCO2e)",
         published=552_000.0, unit="kgCO2e",
         predict=lambda: carbon_kg(GPT3, hours=GPT3_HOURS, grid=GPT3_GRID, utilization="training"),
         tolerance=0.10, source=PATTERSON_SOURCE, note="Same 5 % as the energy: the grid factor is theirs."),
]

CASES += [
    Case(id=f"{name}-carbon", area="operations", title=f"{name} pretraining, location-based (tCO2e)",
         published=tonnes, unit="tCO2e", predict=lambda device=device, hours=hours: _llama_t(device, hours),
         tolerance=0.10, source=src, note=LLAMA_NOTE)
    for name, (device, hours, tonnes, src) in LLAMA_CARDS.items()
]
