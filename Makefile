# The README's commands: `sudo make demo`, `sudo make test`. Both run `setup` first (idempotent).
PY := .venv/bin/python
export PYTHONWARNINGS := ignore

.PHONY: setup demo test unit emulation bench clean
setup:
	@bash scripts/setup.sh

demo: setup
	$(PY) -m harness.cli netcheck --topology fattree

test: setup
	$(PY) -m pytest -q tests/unit tests/emulation

unit: setup
	$(PY) -m pytest -q tests/unit

emulation: setup
	$(PY) -m pytest -q tests/emulation

bench: setup
	$(PY) bench/fabric_fidelity.py

clean:
	$(PY) -m harness.cli clean
