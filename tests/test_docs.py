"""The documentation site, checked as a reader would: built with MkDocs ``--strict`` (a broken link, a missing page
or a missing snippet fails), then every page opened in headless Chromium (Debian's package, driven by Playwright):
each renders its content, its images load, and its internal links and their anchors resolve."""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlparse

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--build", "--site", str(out)],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-4000:]
    assert "WARNING -" not in built.stderr, built.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()


def test_the_site_has_every_page_of_its_navigation(site: Path) -> None:
    for page in ("getting-started", "your-query", "kafka", "choosing", "monitoring", "deploying", "operations",
                 "compatibility", "writing-a-strategy", "architecture", "changelog", "reference/results",
                 "reference/options", "reference/strategies", "reference/hooks", "reference/errors"):
        assert (site / page / "index.html").is_file(), page
    errors = (site / "reference" / "errors" / "index.html").read_text()
    assert "ScalingRefused" in errors and "KafkaSourceError" in errors  # generated from every package's raises


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium: apt-get install chromium (CI's .ci/run installs it)")
def test_every_page_renders_with_its_images_and_internal_links(site: Path, served: str, tmp_path: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright (requirements-dev.txt)")
    pages = sorted(p.relative_to(site).parent.as_posix() for p in site.rglob("index.html")
                   if "assets" not in p.parts and "search" not in p.parts)
    assert len(pages) >= 17, pages
    linked: dict[str, set[str]] = {}
    with playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        failed: list[str] = []
        # a request of the site's that failed; one the browser aborted because the test moved on (a favicon still
        # loading at the next goto) is not the site's: the page's own images are checked as loaded below
        page.on("requestfailed", lambda r: failed.append(f"{r.url}: {r.failure}")
                if r.url.startswith(served) and "ERR_ABORTED" not in (r.failure or "") else None)
        anchors: dict[str, set[str]] = {}
        for path in pages:
            url = urljoin(served, "" if path == "." else f"{path}/")
            response = page.goto(url, wait_until="load")
            assert response is not None and response.ok, (url, response and response.status)
            text = page.inner_text("article")
            assert len(text.strip()) > 100, (url, text[:200])
            assert "--8<--" not in text, f"{url}: a snippet was not included"
            broken = page.evaluate("Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0)"
                                   ".map(i => i.src)")
            assert not broken, (url, broken)
            anchors[url] = set(page.evaluate("Array.from(document.querySelectorAll('[id]')).map(e => e.id)"))
            for href in page.evaluate("Array.from(document.querySelectorAll('article a[href]')).map(a => a.href)"):
                if urlparse(href).netloc == urlparse(served).netloc:
                    linked.setdefault(href, set()).add(url)
            if path in ("getting-started", "reference/results"):
                page.screenshot(path=str(tmp_path / f"{path.replace('/', '-')}.png"), full_page=True)
        assert not failed, failed
        for href, sources in linked.items():
            target, fragment = urldefrag(href)
            if target not in anchors:
                response = page.goto(target, wait_until="load")
                assert response is not None and response.ok, (href, sorted(sources))
                anchors[target] = set(page.evaluate(
                    "Array.from(document.querySelectorAll('[id]')).map(e => e.id)"))
            if fragment:
                assert fragment in anchors[target], (href, sorted(sources))
        browser.close()
    assert (tmp_path / "getting-started.png").stat().st_size > 10_000
