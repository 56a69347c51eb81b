"""Bad input gets one line and exit status 2, never a traceback, a hang or a silent acceptance.

A property test mutates every valid spec under experiments/ (one key gets a value no key accepts,
or an unknown key appears) and runs ``schedule``, ``simulate`` and ``run`` on it in-process; ``run``
must refuse before building anything (it is called only on specs ``schedule`` refused, so a spec
the validator wrongly accepts fails the test instead of building a fabric). File-level cases and
the ones a first user hit are listed by hand below.
"""
import math
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import cli

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted(p for p in (ROOT / "experiments").rglob("*.yaml") if "sets" not in p.parts)
DEEP = [[[[[[[[[[[[[[1]]]]]]]]]]]]]]
# none of these is allowed for any key of a spec
BAD_VALUES = [math.nan, math.inf, -math.inf, 1e300, -1, -0.5, "../../x y", {"?": 1}, DEEP, "", [None]]


def paths(doc, prefix=()):
    """Every key path of a document (mappings by key, lists by index), inner nodes included."""
    if isinstance(doc, dict):
        items = doc.items()
    elif isinstance(doc, list):
        items = enumerate(doc)
    else:
        return
    for k, v in items:
        yield prefix + (k,)
        yield from paths(v, prefix + (k,))


def mutate(doc, path, value):
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    err = capsys.readouterr().err
    return code, err


def assert_one_line(code, err, command, where):
    lines = err.strip().splitlines()
    assert code == 2, (code, err[-1500:])
    assert len(lines) == 1 and "Traceback" not in err, err[-1500:]
    assert lines[0].startswith(f"interleave {command}: {where}"), lines[0]
    assert len(lines[0]) < 600, lines[0][:200]


@settings(max_examples=260, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_every_mutated_spec_gets_one_line_and_exit_2(data, tmp_path, capsys):
    src = data.draw(st.sampled_from(SPECS), label="spec")
    doc = yaml.safe_load(src.read_text())
    path = data.draw(st.sampled_from(list(paths(doc))), label="key")
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    if isinstance(parent, dict) and data.draw(st.booleans(), label="an unknown key instead"):
        parent["no_such_key"] = parent[path[-1]]
    else:
        mutate(doc, path, data.draw(st.sampled_from(BAD_VALUES), label="value"))
    f = tmp_path / "mutated.yaml"
    f.write_text(yaml.safe_dump(doc, allow_unicode=True))
    for command in ("schedule", "simulate"):
        assert_one_line(*run_cli(capsys, command, str(f)), command, str(f))
    assert_one_line(*run_cli(capsys, "run", str(f), "--out", str(tmp_path / "never")), "run", str(f))
    assert not (tmp_path / "never").exists()


DEMO = (ROOT / "experiments/demo.yaml").read_text()


@pytest.mark.parametrize("name, content, expect", [
    ("non-utf8", b"name: caf\xe9\n", r"not UTF-8 text \(byte 9"),
    ("utf16", DEMO.encode("utf-16"), r"not UTF-8 text \(byte 0"),
    ("syntax", b"name: demo\njobs: [\n  - {model: vgg19\n", r"not valid YAML \(line \d+, column \d+"),
    ("deep", b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n", r"nesting|not valid YAML"),
    ("alias-bomb", ("a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{c}: &{c} [{','.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))).encode(),
     r"at most 200000 values"),
    ("huge", b"name: x\n" + b"# padding\n" * 200_000, r"bytes; at most 1048576"),
    ("nul", b"name: x\0\n", r"not a text file"),
    ("link-word", DEMO.replace("jobs:", "link: fast\njobs:", 1).encode(), r"link: 'fast' is not allowed"),
    ("cassini-list", DEMO.replace("jobs:", "cassini: [1]\njobs:", 1).encode(), r"cassini: \[1\] is not allowed"),
    ("name-path", DEMO.replace("name: vgg19-a", 'name: "../../x"', 1).encode(), r"jobs\[0\]\.name: '\.\./\.\./x'"),
    ("name-number", DEMO.replace("name: vgg19-a", "name: 7", 1).encode(), r"jobs\[0\]\.name: 7 is not allowed"),
    ("telemetry", DEMO.replace("jobs:", "telemetry: {period_ms: .nan}\njobs:", 1).encode(), r"telemetry\.period_ms"),
])
def test_bad_files_get_one_line_naming_the_file(name, content, expect, tmp_path, capsys):
    f = tmp_path / f"{name}.yaml"
    f.write_bytes(content)
    code, err = run_cli(capsys, "schedule", str(f))
    assert_one_line(code, err, "schedule", str(f))
    assert re.search(expect, err), err


def test_directories_and_devices_are_not_specs(tmp_path, capsys):
    for target, expect in ((tmp_path, "is a directory"), (Path("/dev/zero"), "not a regular file"),
                           (tmp_path / "missing.yaml", "no such file")):
        code, err = run_cli(capsys, "simulate", str(target))
        assert_one_line(code, err, "simulate", str(target))
        assert expect in err


def test_trace_values_of_the_wrong_type(tmp_path, capsys):
    doc = yaml.safe_load((ROOT / "experiments/poisson20-fattree.yaml").read_text())
    for key, value, expect in (("models", "vgg19", "a list of model names"), ("arrival_s", "soon", "trace.arrival_s")):
        bad = {**doc, "trace": {**doc["trace"], key: value}}
        f = tmp_path / f"{key}.yaml"
        f.write_text(yaml.safe_dump(bad))
        code, err = run_cli(capsys, "schedule", str(f))
        assert_one_line(code, err, "schedule", str(f))
        assert expect in err


def test_outputs_are_checked_before_the_work(tmp_path, capsys):
    spec = str(ROOT / "experiments/demo.yaml")
    code, err = run_cli(capsys, "schedule", spec, "--out", str(tmp_path / "no/such/dir/s.json"))
    assert code == 2 and "does not exist" in err
    (tmp_path / "file").write_text("")
    code, err = run_cli(capsys, "simulate", spec, "--out", str(tmp_path / "file"))
    assert code == 2 and "is a file" in err


def test_report_refuses_what_it_cannot_read(tmp_path, capsys):
    d = tmp_path / "r"
    d.mkdir()
    (d / "summary.json").write_text("{}")
    code, err = run_cli(capsys, "report", str(d))
    assert code == 2 and "no schedule.json, iterations.csv, links.csv" in err
    for f in ("schedule.json", "iterations.csv", "links.csv"):
        (d / f).write_text("")
    cases = [(b"\xff\xfe{", "summary.json: not readable JSON"), (b"", "summary.json: not readable JSON"),
             (b"[1]", "summary.json: not a JSON object"), (b"{}", "summary.json: scheduler: missing")]
    for content, expect in cases:
        (d / "summary.json").write_bytes(content)
        code, err = run_cli(capsys, "report", str(d))
        assert code == 2 and expect in err and len(err.strip().splitlines()) == 1, err
    (d / "summary.json").write_text('{"scheduler": "themis", "totals": {}, "fidelity": {}, "jobs": {}}')
    (d / "schedule.json").write_text('{"epochs": []}')
    code, err = run_cli(capsys, "report", str(d))
    assert code == 2 and "iterations.csv: not a readable CSV" in err


def test_the_valid_netsens_spec_schedules(capsys):
    code, err = run_cli(capsys, "schedule", str(ROOT / "experiments/netsens-small.yaml"))
    assert code == 0, err


def test_an_unexpected_error_is_one_line_with_a_saved_traceback(monkeypatch, capsys):
    def boom(args):
        raise RuntimeError("x" * 5000)
    monkeypatch.setattr(cli, "cmd_doctor", boom)
    code, err = run_cli(capsys, "doctor")
    assert code == 70 and len(err.strip().splitlines()) == 1 and len(err) < 400
    saved = Path(re.search(r"traceback saved in (\S+)", err).group(1))
    assert "RuntimeError" in saved.read_text()
    saved.unlink()
