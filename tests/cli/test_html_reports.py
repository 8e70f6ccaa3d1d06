"""``verify-job --html`` and ``nccl inspect --html``: the page a person attaches to a ticket.

What a reader of the page needs, asserted on the real command's output: the verdict word first (the title and
the banner, the same word as the JSON and the exit code), every non-info reason with its fix (each command whole
inside one ``<code>``), the log lines that prove the transport, busbw per collective (Inspector) and per size
(nccl-tests) against the floor with the rows below it marked, the step times against the baseline, nothing
fetched or run (no script, no external URL), no internal path. Two Chromium screenshots (marked slow) prove the
page renders: the banner in the verdict's colour and the below-floor bar in red.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from cli_support import EXAMPLES, JOBS, REPO, refused, run
from test_json_schemas import FABRICS

from screenshot import dump_dom, is_ink, read_png, screenshot

PROFILES = EXAMPLES / "profiles"
ONPREM = PROFILES / "onprem-infiniband.yaml"
GKE = PROFILES / "gke-a3-ultra.yaml"
FALLBACK = JOBS / "socket-fallback"
NCCL_TESTS = REPO / "tests" / "fixtures" / "nccl" / "synthetic" / "nccl-tests" / "all_reduce_perf-ib-2x8.log"
DOCS_SHOTS = REPO / "docs" / "screenshots"
CODE = re.compile(r"`([^`\n]+)`")


def _page(path: Path) -> str:
    page = path.read_text()
    assert "<script" not in page.lower() and not re.search(r"""(src|href)=["']?https?:""", page), "fetches"
    assert "/lustre/x" not in page  # our probe's path is never shown
    return page


def _text(fragment: str) -> str:
    """What the reader sees of an HTML fragment: tags removed, entities decoded, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def _squeeze(fragment: str) -> str:
    """The visible text with no whitespace at all: a sentence reads the same whatever tags split it."""
    return "".join(_text(fragment).split())


def _inspector_job(tmp: Path, **kw: object) -> Path:
    """An HSDP job on the GKE A3 Ultra pool with Inspector records beside its logs (tests/inspector_jobs.py)."""
    from inspector_jobs import hsdp

    job = tmp / "ml-search" / "llm-hsdp"
    logs = job / ".fabricguard" / "nccl"
    shutil.copytree(JOBS / "rdma-healthy" / "logs", logs)
    shutil.copy(JOBS / "rdma-healthy" / "steps.jsonl", logs / "steps.jsonl")
    hsdp(nodes=4, **kw).write(job / ".fabricguard" / "inspector", range(3))  # type: ignore[arg-type]
    return logs


@pytest.mark.parametrize(("profile", "pool", "words"), FABRICS, ids=[f[1] for f in FABRICS])
def test_a_socket_fallback_page_names_the_next_step_for_its_fabric(tmp_path: Path, profile: str, pool: str,
                                                                   words: tuple[str, ...]) -> None:
    out = tmp_path / "job.html"
    argv = ["verify-job", str(FALLBACK), "-p", str(PROFILES / profile), "--pool", pool]
    r = run(*argv, "--html", out)
    doc = json.loads(run(*argv, "--format", "json").stdout)
    assert (r.exit_code, doc["verdict"]) == (1, "degraded")
    page = _page(out)
    title = re.search(r"<title>(.*?)</title>", page)
    assert title and title.group(1).startswith("DEGRADED"), title
    body = page[page.index("<body>"):]
    assert _text(body).startswith("DEGRADED verify-job socket-fallback"), _text(body)[:80]
    assert body.index("id='verdict'") < body.index("What to change")
    # Every non-info reason is on the page, with its whole fix, each command inside one <code>.
    seen = _squeeze(page)
    for reason in doc["reasons"]:
        assert _squeeze(html.escape(reason["message"])) in seen
        if reason["level"] != "info":
            assert reason["fix"] and _squeeze(html.escape(CODE.sub(r"\1", reason["fix"]))) in seen
            for cmd in CODE.findall(reason["fix"]):
                assert f"<code>{html.escape(cmd)}</code>" in page, cmd
    transport = next(x for x in doc["reasons"] if x["check"] == "transport" and x["level"] != "info")
    for w in words:
        assert html.escape(w) in page, w
    # What went wrong is quoted first among the evidence: the fallback line, whole.
    assert page.index("Failed to initialize NET plugin IB") < page.index("NCCL version")
    assert transport["fix"] and page.index("What to change") < page.index("Transport and its evidence")


def test_inspector_busbw_and_steps_are_drawn_against_their_floors(tmp_path: Path) -> None:
    logs = _inspector_job(tmp_path, shape_busbw={1: 20.0})  # replicate groups under one NIC's floor
    out = tmp_path / "job.html"
    r = run("verify-job", logs, "-p", GKE, "--pool", "h200-rdma", "--html", out)
    assert r.exit_code == 1, r.output
    page = _page(out)
    bars = re.findall(r"<rect class=\"bar\"[^>]*fill=\"(#[0-9a-f]+)\"><title>([^<]*)</title>", page)
    assert {t.split(":")[0] for _c, t in bars} == {"AllReduce, 1 GPU(s) per node", "AllReduce, 8 GPU(s) per node"}
    colour = {t.split(":")[0]: c for c, t in bars}
    assert colour["AllReduce, 1 GPU(s) per node"] == "#d62728" and colour["AllReduce, 8 GPU(s) per node"] != "#d62728"
    assert len(re.findall(r'<line class="floor"', page)) == 2  # each bar's own floor: 35.5 and 284
    below = re.findall(r"<tr class='below'>(.*?)</tr>", page)
    assert len(below) == 1 and "35.5" in below[0] and "20.0" in below[0]
    # Step times: one point per step, with the baseline and the allowed limit (baseline x tolerance).
    pts = re.search(r'<polyline class="series-line"[^>]*points="([^"]+)"', page)
    assert pts and len(pts.group(1).split()) == 40
    assert "baseline 6.07 s" in page and "allowed 7.284 s" in page


def test_nccl_tests_rows_are_plotted_per_size_against_the_floor(tmp_path: Path) -> None:
    out = tmp_path / "inspect.html"
    r = run("nccl", "inspect", NCCL_TESTS, "-p", ONPREM, "--pool", "h100-ib", "--html", out)
    page = _page(out)
    doc = json.loads(run("nccl", "inspect", NCCL_TESTS, "-p", ONPREM, "--pool", "h100-ib", "--format", "json").stdout)
    assert r.exit_code == {"pass": 0, "degraded": 1, "failed": 2}[doc["verdict"]]
    assert _text(page[page.index("<body>"):]).startswith(doc["verdict"].upper() + " nccl inspect")
    rows = doc["nccl_tests"][0]["rows"]
    points = re.findall(r'<circle class="point"', page)
    assert len(points) == len([x for x in rows if x["out_of_place"]["busbw_gbps"] is not None and x["size"] > 0])
    assert re.search(r'<line class="floor', page), "the pool's floor is drawn"
    for x in rows:
        assert f"<td class='num'>{x['size']}</td>" in page  # every size whole, never cut


def test_unjudged_inspection_says_how_to_judge(tmp_path: Path) -> None:
    out = tmp_path / "inspect.html"
    r = run("nccl", "inspect", FALLBACK / "logs", "--html", out)
    assert r.exit_code == 0
    page = _page(out)
    assert "<title>UNJUDGED" in page and "pass --expect TRANSPORT or -p PROFILE" in page
    assert "Failed to initialize NET plugin IB" in page


@pytest.mark.parametrize("where", ["dir", "missing-folder"])
def test_an_unusable_html_path_is_refused_before_reading(tmp_path: Path, where: str) -> None:
    target = tmp_path if where == "dir" else tmp_path / "no" / "such" / "r.html"
    refused(run("verify-job", FALLBACK, "-p", ONPREM, "--pool", "gh200-roce", "--html", target), "--html",
            str(target))
    refused(run("nccl", "inspect", FALLBACK / "logs", "--html", target), "--html", str(target))


def _amber(rgb: tuple[int, int, int]) -> bool:  # the degraded banner's background (#fff4dc) and edge (#8a5a00)
    return rgb[0] > 240 and 235 < rgb[1] < 250 and 205 < rgb[2] < 230


def _red(rgb: tuple[int, int, int]) -> bool:  # a below-floor bar (#d62728)
    return rgb[0] > 190 and rgb[1] < 70 and rgb[2] < 70


@pytest.mark.slow
def test_verify_job_page_renders_in_chromium(tmp_path: Path) -> None:
    logs = _inspector_job(tmp_path, shape_busbw={1: 20.0})
    page = tmp_path / "job.html"
    assert run("verify-job", logs, "-p", GKE, "--pool", "h200-rdma", "--html", page).exit_code == 1
    img = read_png(screenshot(page, tmp_path / "job.png", 1100, 2400))
    assert img.count(is_ink, step=4) > 3000, "the page rendered (almost) blank"
    assert img.count(_amber, step=4, box=(0, 0, img.width, 120)) > 1000, "the banner is not the degraded colour"
    assert img.count(_red, step=2) > 40, "no below-floor bar drawn in red"
    # Laid out at a 1100-pixel window, nothing overflows sideways (long log lines and commands wrap).
    probe = ("<script>document.body.insertAdjacentHTML('beforeend','<pre id=m>'+"
             "[document.documentElement.scrollWidth,window.innerWidth].join(' ')+'</pre>')</script>")
    wide = tmp_path / "probe.html"
    wide.write_text(page.read_text().replace("</body>", probe + "</body>"))
    m = re.search(r'<pre id="m">(\d+) (\d+)</pre>', dump_dom(wide))
    assert m and int(m.group(1)) <= int(m.group(2)), m and m.groups()
    if os.environ.get("FABRICGUARD_UPDATE_SCREENSHOTS"):
        DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
        screenshot(page, DOCS_SHOTS / "verify-job-report.png", 1100, 2400)


@pytest.mark.slow
def test_nccl_inspect_page_renders_in_chromium(tmp_path: Path) -> None:
    page = tmp_path / "inspect.html"
    assert run("nccl", "inspect", FALLBACK / "logs", "-p", ONPREM, "--pool", "gh200-roce",
               "--html", page).exit_code == 1
    img = read_png(screenshot(page, tmp_path / "inspect.png", 1000, 1400))
    assert img.count(is_ink, step=4) > 2000
    assert img.count(_amber, step=4, box=(0, 0, img.width, 120)) > 1000
    if os.environ.get("FABRICGUARD_UPDATE_SCREENSHOTS"):
        screenshot(page, DOCS_SHOTS / "nccl-inspect-report.png", 1000, 1400)
