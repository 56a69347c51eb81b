# The README's commands: `sudo make demo`, `sudo make test`. Both run `setup` first (idempotent).
PY := .venv/bin/python
export PYTHONWARNINGS := ignore

.PHONY: docs setup demo test test-experiments unit emulation vm-test bench clean reproduce nightly simulate-eval echelon cassini-sim cassini-leafspine cassini-table2
setup:
	@bash scripts/setup.sh

DEMO := experiments/demo.yaml
demo: setup
	$(PY) -m harness.cli netcheck --topology fattree
	@rm -rf results/demo-themis results/demo-cassini results/demo-report
	$(PY) -m harness.cli run $(DEMO) --scheduler themis --out results/demo-themis
	$(PY) -m harness.cli run $(DEMO) --scheduler themis+cassini --out results/demo-cassini
	$(PY) -m harness.cli report results/demo-themis results/demo-cassini --out results/demo-report

# CASSINI's evaluation in emulation (32 min measured on 2 cores); resumable: complete runs are kept
reproduce: setup
	$(PY) -m harness.cli reproduce experiments/sets/reproduction.yaml --out results/reproduction

# the nightly tier: the experiment-sized tests, then the reproduction set plus the network-sensitive
# comparison, with floors on the headline ratios (experiments/sets/nightly.yaml); exit 1 when one falls below
NIGHTLY_OUT ?= results/nightly-$(shell date +%Y%m%d)
nightly: setup test-experiments
	$(PY) -m harness.cli reproduce experiments/sets/nightly.yaml --out $(NIGHTLY_OUT) --floors --quiet

# network-sensitive scheduling at scale, in the simulator (no root)
simulate-eval:
	$(PY) -m harness.cli reproduce experiments/sets/netsens-sim.yaml --simulate --out results/netsens-sim

# CASSINI's evaluation on the paper's testbed (leafspine): screened in the simulator, then emulated
cassini-sim:
	$(PY) -m harness.cli reproduce experiments/sets/cassini-sim.yaml --simulate --out results/cassini-sim --quiet

# CASSINI's Table 2 with the profile set table2: snapshot jobs alone and on their shared uplink,
# simulated then emulated, beside the paper's communication times (harness.table2)
cassini-table2: setup
	$(PY) -m harness.cli reproduce experiments/sets/table2.yaml --simulate --out results/table2-sim --quiet
	$(PY) -m harness.cli reproduce experiments/sets/table2.yaml --out results/table2 --quiet
	$(PY) -m harness.table2 experiments/sets/table2.yaml --out results/table2 --publish results/cassini-testbed/README.md

cassini-leafspine: setup
	$(PY) -m harness.cli reproduce experiments/sets/cassini-leafspine.yaml --out results/cassini-leafspine --quiet

# EchelonFlow: fair / coflow / echelon (and with searched shifts) for pipeline and tensor-parallel
# jobs, in emulation and in the flow model that plans the pacing (experiments/sets/echelon.yaml),
# with the runs that slowed part-way listed (harness.drift);
# then echelon on priority queues against fair sharing and coflow (experiments/sets/echelon-priority.yaml)
# and the calibrated flow model's predictions against those measurements (harness.modelcheck);
# then echelon's priorities fixed against re-planned from measured arrivals (experiments/sets/echelon-replan.yaml)
# then a pipeline next to CASSINI's VGG19 profile job, fair against echelon (experiments/sets/echelon-mixed.yaml)
echelon: setup
	$(PY) -m harness.cli reproduce experiments/sets/echelon.yaml --out results/echelon --publish results/echelon/README.md
	$(PY) -m harness.cli reproduce experiments/sets/echelon.yaml --simulate --out results/echelon-sim --against results/echelon --publish results/echelon/README.md
	$(PY) -m harness.drift experiments/sets/echelon.yaml --out results/echelon --publish results/echelon/README.md
	$(PY) -m harness.cli reproduce experiments/sets/echelon-priority.yaml --out results/echelon-priority --publish results/echelon/README.md
	$(PY) -m harness.modelcheck experiments/sets/echelon-priority.yaml --out results/echelon-priority --publish results/echelon/README.md
	$(PY) -m harness.cli reproduce experiments/sets/echelon-replan.yaml --out results/echelon-replan --publish results/echelon/README.md
	$(PY) -m harness.cli reproduce experiments/sets/echelon-mixed.yaml --out results/echelon-mixed --publish results/echelon/README.md

# make test: the unit tier on both cores (pytest-xdist), then the emulation tier's tests of behaviour
# one at a time (one fabric at a time; the emulator needs the CPU); each prints its slowest tests.
# The experiment-sized emulation tests (marker `experiment`) are `make test-experiments`.
test: setup
	$(PY) -m pytest -q -n 2 --durations=5 tests/unit
	$(PY) -m pytest -q --durations=10 -m "not experiment" tests/emulation

# the documentation site: docs/ built by mkdocs in strict mode into site/ (a broken link, a page
# left out of the nav fails it), then opened with the demo's report in headless chromium (tests/docs)
docs:
	@bash scripts/setup.sh --docs
	$(PY) -m mkdocs build --strict
	$(PY) -m pytest -q -p no:cacheprovider tests/docs

test-experiments: setup
	$(PY) -m pytest -q --durations=0 -m experiment tests/emulation

unit: setup
	$(PY) -m pytest -q -n 2 -m "not root"

emulation: setup
	$(PY) -m pytest -q -m "root and not experiment"

# the stock-kernel tier: tests/stock (or VM_CMD) inside a user-mode-Linux guest with the kernel OVS
# datapath, sch_red, netem and DCTCP (scripts/vm_test.sh; the guest image is cached in .vm/)
vm-test: setup
	@bash scripts/vm_test.sh $(VM_CMD)

bench: setup
	$(PY) bench/fabric_fidelity.py
	$(PY) bench/fabric_fidelity.py --rates 50 --telemetry-ms 0,1000,100,50
	$(PY) bench/replay_accuracy.py
	$(PY) bench/schedule_speed.py
	$(PY) bench/sim_speed.py
	$(PY) bench/sweep_speed.py

clean:
	$(PY) -m harness.cli clean
	rm -rf .vm
