"""`make docs`: the documentation site builds in strict mode and its pages, and the HTML report of
the demo (simulated under both schedulers), render in a real headless browser (the distro's
chromium, which ``scripts/setup.sh --docs`` installs) with every image loaded. Not in ``make test``:
it needs that browser; CI runs ``make docs``."""
import json
import shutil
import subprocess
import sys

import pytest

from tests.helpers import ROOT, cli_main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PAGES = {"index.html": "Interleave", "walkthrough.html": "Walkthrough - Interleave", "spec.html": "Spec - Interleave",
         "cli.html": "Command line - Interleave", "plugins.html": "Extending - Interleave",
         "machines.html": "Machines and fidelity - Interleave", "results/index.html": "Index - Interleave",
         "results/demo/index.html": "Demo - Interleave"}     # the titles mkdocs.yml's nav gives

PROBE = """<html><body><pre id="r">pending</pre><iframe id="f" src="{url}" width="1200" height="900"></iframe>
<script>
const f = document.getElementById("f");
f.onload = () => {{
  const d = f.contentDocument, imgs = Array.from(d.images);
  document.getElementById("r").textContent = JSON.stringify({{title: d.title, text: d.body.innerText.length,
    links: d.links.length, images: imgs.length,
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute("src"))}});
}};
</script></body></html>"""


def render(page, tmp_path):
    """What the browser shows of ``page`` (a file): title, length of its text, links, images and the
    images that did not load."""
    assert CHROMIUM, "chromium is not installed: make docs installs it (scripts/setup.sh --docs)"
    probe = tmp_path / f"probe-{page.name}.html"
    probe.write_text(PROBE.format(url=page.resolve().as_uri()))
    p = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
                        "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
                       capture_output=True, text=True, timeout=120)
    out = p.stdout.split('<pre id="r">', 1)[-1].split("</pre>", 1)[0]
    assert out != "pending" and out.startswith("{"), f"{page}: the browser gave {p.stdout[-500:]!r} {p.stderr[-500:]!r}"
    return json.loads(out.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"'))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"mkdocs build --strict failed:\n{p.stdout[-3000:]}{p.stderr[-3000:]}"
    return out


def test_the_site_builds_strictly_and_its_pages_render(site, tmp_path):
    for name, title in PAGES.items():
        r = render(site / name, tmp_path)
        assert r["title"] == title and r["text"] > 500 and r["links"] > 10, (name, r)
        assert r["broken"] == [], (name, r)


def test_the_demo_report_renders_with_its_plots(tmp_path, capsys):
    dirs = []
    for s in ("themis", "themis+cassini"):
        d = tmp_path / s
        assert cli_main(capsys, "simulate", str(ROOT / "experiments/demo.yaml"), "--scheduler", s, "--out",
                        str(d)).returncode == 0
        dirs.append(str(d))
    assert cli_main(capsys, "report", *dirs, "--out", str(tmp_path / "rep")).returncode == 0
    r = render(tmp_path / "rep" / "report.html", tmp_path)
    assert r["images"] == 3 and r["broken"] == [] and r["text"] > 500, r


def test_a_missing_image_is_seen(tmp_path):
    """The check can fail: a page whose image file is absent reports it broken."""
    page = tmp_path / "page.html"
    page.write_text('<html><head><title>t</title></head><body><p>x</p><img src="absent.png"></body></html>')
    assert render(page, tmp_path)["broken"] == ["absent.png"]


def test_a_broken_link_fails_the_build(tmp_path):
    """Strict mode is on (mkdocs.yml; not with -q, which hides the warnings strict mode counts): the
    same docs with one link to a page that does not exist do not build."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    (tmp_path / "mkdocs.yml").write_text((ROOT / "mkdocs.yml").read_text())
    with open(tmp_path / "docs" / "concepts.md", "a") as f:
        f.write("\nSee [the missing page](missing.md).\n")
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "-d", str(tmp_path / "site")], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode != 0 and "missing.md" in p.stdout + p.stderr, p.stdout + p.stderr
