"""Derives the built-in profiles in workloads/profiles/ from the numbers CASSINI (NSDI' 24) gives.

Re-run after changing a rule: ``python -m workloads.derive_profiles``. Each written number carries a
provenance string saying which figure/table it comes from, or which formula and modelling choice
produced it ([I] marks an implementer decision, not the paper's content).
"""
import yaml
from pathlib import Path
OUT = Path(__file__).resolve().parent / "profiles"
B_EFF = 37.0
BEFF_SRC = ("effective all-reduce rate 37 Gbit/s = VGG16's 528 MB sent in its 114 ms Up phase "
            "(CASSINI Fig. 3: 255 ms iteration, 141 ms Down; Table 3: 528 MB); modelling choice: every "
            "data-parallel model drives the NIC at this rate")
FLOPS = {"vgg11": 7.61, "vgg16": 15.47, "vgg19": 19.63, "wideresnet101": 22.75, "resnet50": 4.09}
FLOPS_SRC = "torchvision model-card GFLOPS per 224x224 image"
MEM_SRC = "CASSINI Table 3 (App. B): GPU memory footprint"
common_ref = "CASSINI §5.1: 50 Gbit/s ConnectX-5 NIC per server"
def dp(name, mb, compute, compute_src, batch, batch_src, workers=2):
    up = round(mb * 8 / B_EFF)
    it = compute + up
    return {
        "model": name, "parallelism": "data", "iteration_ms": it, "reference_gbps": 50,
        "batch_size": batch, "workers": workers, "model_mb": mb,
        "phases": [{"start_ms": compute, "duration_ms": up, "gbps": B_EFF, "pattern": "ring_allreduce"}],
        "provenance": {
            "iteration_ms": f"compute + Up = {compute} + {up} ms (see phases[0])",
            "reference_gbps": common_ref, "batch_size": batch_src,
            "workers": "CASSINI §2.2: the data-parallel example jobs run on 2 servers each",
            "model_mb": MEM_SRC,
            "phases[0].start_ms": compute_src,
            "phases[0].duration_ms": f"ring all-reduce: 2(N-1)/N x model size = {mb} MB for N=2, at 37 Gbit/s -> {mb}*8/37 = {mb*8/B_EFF:.1f} ms, rounded",
            "phases[0].gbps": BEFF_SRC,
        }}
profiles = {}
profiles["vgg16"] = dp("vgg16", 528, 141, "CASSINI Fig. 3: Down phase 141 ms (200 deg of a 255 ms circle) at the start of the iteration", 1400, "CASSINI Table 2 (snapshot 1)")
for m, mb, batch, bsrc in (("vgg11", 507, 1024, "modelling choice within CASSINI Table 3 range 512-1800"),
                           ("vgg19", 549, 1400, "CASSINI Table 2 (snapshots 2 and 5)"),
                           ("wideresnet101", 243, 800, "CASSINI Table 2 (snapshots 1 and 5)"),
                           ("resnet50", 98, 1600, "CASSINI Table 2 (snapshot 2)")):
    c = round(141 * FLOPS[m] / FLOPS["vgg16"])
    profiles[m] = dp(m, mb, c, f"modelling choice: VGG16's 141 ms compute x FLOPs ratio {FLOPS[m]}/{FLOPS['vgg16']} ({FLOPS_SRC}) = {141*FLOPS[m]/FLOPS['vgg16']:.1f} ms, rounded", batch, bsrc)
# language models: iteration read from CASSINI Table 2 (Themis column) where given
def lang(m, mb, iteration, it_src, batch, bsrc, compute=None, compute_src=None):
    up = round(mb * 8 / B_EFF)
    if compute is None:
        compute = iteration - up
        compute_src = f"iteration {iteration} ms ({it_src}) minus Up {up} ms"
    return dp(m, mb, compute, compute_src, batch, bsrc)
profiles["bert"] = lang("bert", 450, 213, "CASSINI Table 2 snapshot 5, Themis column, read as the iteration time [I]", 8, "CASSINI Table 2 (snapshot 5)")
bert_compute = profiles["bert"]["phases"][0]["start_ms"]
profiles["roberta"] = lang("roberta", 800, 210, "CASSINI Table 2 snapshot 4, Themis column (210/208 ms), read as the iteration time [I]", 12, "CASSINI Table 2 (snapshot 4)")
profiles["camembert"] = lang("camembert", 266, None, None, 16, "modelling choice within CASSINI Table 3 range 8-32",
                             compute=bert_compute, compute_src=f"modelling choice: BERT's compute time ({bert_compute} ms; same BERT-base size class)")
profiles["xlm"] = lang("xlm", 1116, None, None, 16, "modelling choice within CASSINI Table 3 range 4-32",
                       compute=bert_compute, compute_src=f"modelling choice: BERT's compute time ({bert_compute} ms)")
# model-parallel / hybrid
profiles["gpt1"] = {
    "model": "gpt1", "parallelism": "hybrid", "iteration_ms": 200, "reference_gbps": 50, "batch_size": 32, "workers": 4, "model_mb": 650,
    "phases": [{"start_ms": 110, "duration_ms": 90, "gbps": 37.0, "pattern": "ring_allreduce"}],
    "provenance": {"iteration_ms": "CASSINI Fig. 1 (GPT-1 on 4 servers): about 3 iterations in 600 ms [I: read from the plot axis]",
                   "reference_gbps": common_ref, "batch_size": "CASSINI Table 3 range 32-80 (lower end)",
                   "workers": "CASSINI §2.1: GPT-1 measured on 4 servers", "model_mb": MEM_SRC + " (lower end of 650-9000)",
                   "phases[0].start_ms": "CASSINI §2.1: forward pass has near-zero demand, then one high-utilisation period; start = iteration - duration",
                   "phases[0].duration_ms": "modelling choice: the same Up share as VGG16 (114/255 = 45 %) of 200 ms",
                   "phases[0].gbps": BEFF_SRC}}
profiles["gpt2"] = {
    "model": "gpt2", "parallelism": "pipeline", "iteration_ms": 200, "reference_gbps": 50, "batch_size": 24, "workers": 2, "model_mb": 1623,
    "phases": [{"start_ms": 20, "duration_ms": 10, "gbps": 15.0, "pattern": "pipeline_p2p"},
               {"start_ms": 50, "duration_ms": 10, "gbps": 15.0, "pattern": "pipeline_p2p"},
               {"start_ms": 80, "duration_ms": 10, "gbps": 15.0, "pattern": "pipeline_p2p"},
               {"start_ms": 110, "duration_ms": 80, "gbps": 37.0, "pattern": "ring_allreduce"}],
    "provenance": {"iteration_ms": "CASSINI Fig. 1 (GPT-2 pipeline on 2 servers): about 2 iterations in 400 ms [I: read from the plot axis]",
                   "reference_gbps": common_ref, "batch_size": "CASSINI §5.2: GPT2-A, batch 24",
                   "workers": "CASSINI §2.1: GPT-2 split over 2 servers (layers 1-12 / 13-24)", "model_mb": MEM_SRC + " (lower end)",
                   **{f"phases[{i}].{k}": v for i in range(3) for k, v in (
                       ("start_ms", "CASSINI §2.1: three small peaks in the forward pass (activations of 3 minibatches); spacing 30 ms is a modelling choice"),
                       ("duration_ms", "modelling choice: short peaks (10 ms) as drawn in Fig. 1 [I]"),
                       ("gbps", "modelling choice: 'small' peaks at 15 Gbit/s [I]"))},
                   "phases[3].start_ms": "CASSINI §2.1: heavy AllReduce between the embedding layers after the forward pass; placement is a modelling choice",
                   "phases[3].duration_ms": "modelling choice: 40 % of the iteration [I]",
                   "phases[3].gbps": BEFF_SRC}}
gpt3_phases = [(0, 400, 25.0, "tensor_allreduce"), (500, 100, 15.0, "pipeline_p2p"), (700, 400, 25.0, "tensor_allreduce"),
               (1300, 400, 25.0, "tensor_allreduce"), (1800, 100, 15.0, "pipeline_p2p"), (2200, 600, 37.0, "ring_allreduce")]
profiles["gpt3"] = {
    "model": "gpt3", "parallelism": "hybrid", "iteration_ms": 3000, "reference_gbps": 50, "batch_size": 16, "workers": 8, "model_mb": 1952,
    "phases": [{"start_ms": s, "duration_ms": d, "gbps": g, "pattern": p} for s, d, g, p in gpt3_phases],
    "provenance": {"iteration_ms": "CASSINI Fig. 1 (GPT-3 hybrid on 8 servers): about 2 iterations in 6 s [I: read from the plot axis]",
                   "reference_gbps": common_ref, "batch_size": "CASSINI Table 3 range 16-48 (lower end)",
                   "workers": "CASSINI §2.1: hybrid GPT-3 on 8 servers (PP 2 x TP 2, replicated x2 by DP)", "model_mb": MEM_SRC + " (lower end)",
                   **{f"phases[{i}].start_ms": "CASSINI §2.1/Fig. 6: 6 Up-Down phases of different durations and rates; boundaries are a modelling choice [I]" for i in range(6)},
                   **{f"phases[{i}].duration_ms": "modelling choice [I]: tensor phases 400 ms, pipeline 100 ms, DP all-reduce 600 ms" for i in range(6)},
                   **{f"phases[{i}].gbps": ("CASSINI §2.1: tensor parallelism drives about 25 Gbit/s" if p == "tensor_allreduce" else
                                            "modelling choice: small pipeline transfers at 15 Gbit/s [I]" if p == "pipeline_p2p" else BEFF_SRC)
                      for i, (_s, _d, _g, p) in enumerate(gpt3_phases)}}}
profiles["dlrm"] = {
    "model": "dlrm", "parallelism": "hybrid", "iteration_ms": 150, "reference_gbps": 50, "batch_size": 512, "workers": 2, "model_mb": 890,
    "phases": [{"start_ms": 30, "duration_ms": 25, "gbps": 20.0, "pattern": "alltoall"},
               {"start_ms": 95, "duration_ms": 25, "gbps": 20.0, "pattern": "alltoall"},
               {"start_ms": 125, "duration_ms": 20, "gbps": 37.0, "pattern": "ring_allreduce"}],
    "provenance": {"iteration_ms": "modelling choice [I]: CASSINI gives no DLRM iteration time",
                   "reference_gbps": common_ref, "batch_size": "CASSINI Table 3 range 16-1024",
                   "workers": "modelling choice [I]: embedding tables partitioned over 2 servers", "model_mb": MEM_SRC + " (lower end of 890-1962)",
                   "phases[0].start_ms": "DLRM structure (CASSINI §5.1: embedding tables partitioned, rest replicated): forward embedding all-to-all after bottom MLP; timing is a modelling choice [I]",
                   "phases[0].duration_ms": "modelling choice [I]", "phases[0].gbps": "modelling choice [I]",
                   "phases[1].start_ms": "backward embedding all-to-all; timing is a modelling choice [I]",
                   "phases[1].duration_ms": "modelling choice [I]", "phases[1].gbps": "modelling choice [I]",
                   "phases[2].start_ms": "all-reduce of the replicated dense part at the end of backprop; modelling choice [I]",
                   "phases[2].duration_ms": "modelling choice [I]", "phases[2].gbps": BEFF_SRC}}


def main():
    for name, d in profiles.items():
        (OUT / f"{name}.yaml").write_text(f"# Built-in profile: {name}. Every number's source is under provenance.\n"
                                          + yaml.safe_dump(d, sort_keys=False, width=120, allow_unicode=True))
    print("wrote", ", ".join(sorted(profiles)))


if __name__ == "__main__":
    main()
