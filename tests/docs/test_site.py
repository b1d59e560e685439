"""The built documentation site as a reader meets it: opened from the disk (no server), in Debian's
chromium through Playwright, at a laptop's 1280 px.

The parameter reference's tables fit their column (no sideways scrolling, every header on screen); the
tour shows the deployment test's pictures; search answers from a file:// page; and no page loads an asset
from the internet (the site is read offline). The screenshot of the parameter reference is kept in
build/docs/ for a person to look at.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("TFJOB_E2E_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = ROOT / "build" / "docs"
WIDTH = 1280

pytestmark = pytest.mark.timeout(180)


# What the site is made from: a file of these changed after a build leaves that build behind the checkout.
SITE_SOURCES = ("docs", "mkdocs.yml", "scripts", "airflow_tfjob")


def stale(site_dir: Path, since: float, root: Path = ROOT) -> str | None:
    """Why the build in ``site_dir`` is not one made since ``since`` (seconds since the epoch) from the
    checkout ``root`` as it is, or None when it is."""
    index = site_dir / "index.html"
    if not index.is_file():
        return f"no {index}"
    built = index.stat().st_mtime  # written by the build; copied theme files keep their own times
    if built < since:
        return f"{index} was built before this run"
    for name in SITE_SOURCES:
        source = root / name
        for path in (source, *source.rglob("*")) if source.is_dir() else (source,):
            if path.is_file() and "__pycache__" not in path.parts and path.stat().st_mtime > built:
                return f"{path} changed after the site was built"
    return None


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole site, built as `make docs` builds it (strict). `make test` runs `make docs` first and
    names its build (TFJOB_DOCS_SITE) and the time the run started (TFJOB_DOCS_SINCE): that build is read
    when it is this run's and no source changed since, so the site is built once per run; anywhere else
    it is built here, into a folder of its own."""
    given, since = os.environ.get("TFJOB_DOCS_SITE"), os.environ.get("TFJOB_DOCS_SINCE")
    if given and since and stale(Path(given), float(since)) is None:
        return Path(given)
    site_dir = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--quiet", "--site-dir", str(site_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env=os.environ | {"NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr
    return site_dir


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield launched
        finally:
            launched.close()


def test_a_build_not_made_by_this_run_or_behind_its_sources_is_not_reused(tmp_path: Path) -> None:
    """The fixture's choice, on a checkout of its own: a site built before the run, or before a source's
    last change, or missing, is built again."""
    root, site_dir = tmp_path / "checkout", tmp_path / "checkout" / "build" / "site"
    for name in ("docs/index.md", "docs/api/parameters.md", "mkdocs.yml", "scripts/docs_parameters.py",
                 "airflow_tfjob/operators/tfjob.py", "build/site/index.html"):  # fmt: skip
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x")
    source_time, built = 1_000_000.0, 1_000_100.0
    for path in root.rglob("*"):
        os.utime(path, (source_time, source_time))
    os.utime(site_dir / "index.html", (built, built))
    assert stale(site_dir, since=built - 60, root=root) is None
    assert "before this run" in str(stale(site_dir, since=built + 60, root=root))
    assert "no " in str(stale(tmp_path / "nowhere", since=0, root=root))
    for name in ("docs/api/parameters.md", "mkdocs.yml", "airflow_tfjob/operators/tfjob.py"):
        os.utime(root / name, (built + 1, built + 1))
        assert f"{name} changed after the site was built" in str(stale(site_dir, since=0, root=root))
        os.utime(root / name, (source_time, source_time))
    assert stale(site_dir, since=0, root=root) is None


def test_no_page_loads_an_asset_from_the_internet(site: Path) -> None:
    # Links to other sites are fine (a reader follows them on purpose); scripts, stylesheets, images and
    # fonts are not: the site must render and search with no network.
    fetched = []
    for page in site.rglob("*.html"):
        html = page.read_text()
        fetched += [
            (page.name, url)
            for url in re.findall(r'<(?:script|img|iframe)[^>]*\ssrc="(https?://[^"]+)"', html)
        ]
        fetched += [(page.name, url) for url in re.findall(r'<link[^>]*\shref="(https?://[^"]+)"', html)]
    for sheet in site.rglob("*.css"):
        fetched += [
            (sheet.name, url) for url in re.findall(r"url\([\"']?(https?://[^)\"']+)", sheet.read_text())
        ]
    assert fetched == []


def test_the_parameter_reference_fits_1280_px(site: Path, browser: Any) -> None:
    page = browser.new_page(viewport={"width": WIDTH, "height": 900})
    try:
        page.goto((site / "api" / "parameters.html").as_uri())
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "parameters-1280.png"), full_page=True)
        tables = page.evaluate(
            r"""() => [...document.querySelectorAll('article table')].map(table => {
                const wrappers = [table, table.parentElement, table.parentElement.parentElement];
                return {
                    rows: table.rows.length,
                    overflowing: wrappers.filter(w => w.scrollWidth > w.clientWidth).map(w => w.className || w.tagName),
                    headers: [...table.querySelectorAll('th')].map(th => {
                        // The header's longest word, measured in the header's own font, against the room
                        // inside its cell: a header squeezed until a word breaks is not readable.
                        const style = getComputedStyle(th);
                        const pen = document.createElement('canvas').getContext('2d');
                        pen.font = style.font;
                        const longest = Math.max(...th.innerText.trim().split(/\s+/).map(w => pen.measureText(w).width));
                        const room = th.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
                        const box = th.getBoundingClientRect();
                        return {text: th.innerText.trim(), left: box.left, right: box.right, longest, room};
                    }),
                    right: Math.max(...[...table.querySelectorAll('td, th')].map(c => c.getBoundingClientRect().right)),
                };
            })"""
        )
        viewport_width = page.evaluate("document.documentElement.clientWidth")
    finally:
        page.close()
    # The operators' table and the sensors' table.
    assert len(tables) == 2 and all(table["rows"] > 5 for table in tables)
    for table in tables:
        assert table["overflowing"] == [], f"a table scrolls sideways: {table['overflowing']}"
        assert table["right"] <= viewport_width
        for header in table["headers"]:
            # On screen and wide enough for its longest word.
            assert header["left"] >= 0 and header["right"] <= viewport_width, header
            assert header["room"] + 0.5 >= header["longest"], header
    assert "Kinds" in [header["text"] for header in tables[0]["headers"]]


def test_no_table_on_any_page_scrolls_sideways(site: Path, browser: Any) -> None:
    # The readthedocs theme kept every cell on one line, so wide tables hid their right columns; every
    # table now wraps its text within the page's column.
    page = browser.new_page(viewport={"width": WIDTH, "height": 900})
    overflowing = {}
    try:
        for html in sorted(site.rglob("*.html")):
            page.goto(html.as_uri())
            wide = page.evaluate(
                """() => [...document.querySelectorAll('article table')]
                    .filter(t => [t, t.parentElement, t.parentElement.parentElement]
                        .some(w => w.scrollWidth > w.clientWidth + 1))
                    .map(t => t.rows[0].innerText.slice(0, 60))"""
            )
            if wide:
                overflowing[str(html.relative_to(site))] = wide
    finally:
        page.close()
    assert overflowing == {}


def test_the_tour_shows_the_log_view(site: Path, browser: Any) -> None:
    page = browser.new_page(viewport={"width": WIDTH, "height": 900})
    try:
        page.goto((site / "tour.html").as_uri())
        pictures = page.evaluate(
            """() => [...document.querySelectorAll('article img')].map(img => ({
                src: img.getAttribute('src'), width: img.naturalWidth, shown: img.getBoundingClientRect().width,
            }))"""
        )
    finally:
        page.close()
    by_name = {Path(picture["src"]).name: picture for picture in pictures}
    for name in ("log-view.png", "links.png"):
        assert by_name[name]["width"] > 0 and by_name[name]["shown"] > 300, pictures


def test_search_answers_offline(site: Path, browser: Any) -> None:
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": WIDTH, "height": 900})
    try:
        page.goto((site / "index.html").as_uri())
        page.locator("input.md-search__input").click()
        # Typed key by key, as a reader does: the search answers keystrokes.
        page.locator("input.md-search__input").press_sequentially("render_only", delay=20)
        results = page.locator(".md-search-result__item")
        expect(results.first).to_be_visible(timeout=30_000)
        expect(page.locator(".md-search-result__meta")).to_contain_text("matching document")
    finally:
        page.close()
