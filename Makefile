# The README's commands: `sudo make demo`, `sudo make test`. Both run `setup` first (idempotent).
PY := .venv/bin/python
export PYTHONWARNINGS := ignore

.PHONY: setup demo test unit emulation bench clean
setup:
	@bash scripts/setup.sh

DEMO := experiments/demo.yaml
demo: setup
	$(PY) -m harness.cli netcheck --topology fattree
	@rm -rf results/demo-themis results/demo-cassini results/demo-report
	$(PY) -m harness.cli run $(DEMO) --scheduler themis --out results/demo-themis
	$(PY) -m harness.cli run $(DEMO) --scheduler themis+cassini --out results/demo-cassini
	$(PY) -m harness.cli report results/demo-themis results/demo-cassini --out results/demo-report

test: setup
	$(PY) -m pytest -q tests/unit tests/emulation

unit: setup
	$(PY) -m pytest -q tests/unit

emulation: setup
	$(PY) -m pytest -q tests/emulation

bench: setup
	$(PY) bench/fabric_fidelity.py
	$(PY) bench/fabric_fidelity.py --rates 50 --telemetry-ms 0,1000,100,50
	$(PY) bench/replay_accuracy.py
	$(PY) bench/schedule_speed.py

clean:
	$(PY) -m harness.cli clean
