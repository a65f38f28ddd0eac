"""The browser harness (tests/browser.py) on small pages: what it reports about errors, failed loads and network access,
the text it reads back, its screenshots, and that no browser process outlives it."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from tests.browser import (
    Browser,
    ConsoleMessage,
    FailedLoad,
    png_size,
    render,
    require_chromium,
)

DESKTOP = {"width": 1280, "height": 900}
NARROW = {"width": 390, "height": 844}


def write_page(folder: Path, body: str, name: str = "page.html") -> Path:
    path = folder / name
    path.write_text("<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
                    "<meta name='viewport' content='width=device-width, initial-scale=1'><title>Harness page</title>"
                    f"</head><body>\n{body}\n</body></html>\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def browser():
    with Browser() as running:
        yield running


def test_clean_page_has_no_problems_and_its_text_is_read_back(tmp_path, browser):
    page = write_page(tmp_path, "<h1>Release report</h1><p>k = 5</p><p hidden>not shown</p>"
                                "<script>document.body.append(Object.assign(document.createElement('p'),"
                                " {textContent: 'written by a script'}));</script>")
    rendered = browser.render(page, **DESKTOP)
    assert rendered.problems == []
    assert rendered.console == [] and rendered.page_errors == [] and rendered.failed_loads == []
    assert rendered.title == "Harness page"
    assert rendered.text.split("\n\n") == ["Release report", "k = 5", "written by a script"]
    assert "<p>written by a script</p>" in rendered.dom and "not shown" in rendered.dom
    assert rendered.url == page.resolve().as_uri()


def test_uncaught_exception_is_a_page_error(tmp_path, browser):
    page = write_page(tmp_path, "<p>before</p><script>throw new Error('chart data missing');</script><p>after</p>")
    rendered = browser.render(page, **DESKTOP)
    assert len(rendered.page_errors) == 1
    assert rendered.page_errors[0].startswith("Error: chart data missing")
    assert rendered.problems == [f"uncaught exception: {rendered.page_errors[0]}"]
    assert rendered.text == "before\n\nafter"


def test_console_error_is_reported_and_other_levels_are_not_errors(tmp_path, browser):
    page = write_page(tmp_path, "<script>console.log('drawing', 3, 'charts', true); console.warn('slow');"
                                " console.error('no rows for', 'age', 0);</script>")
    rendered = browser.render(page, **DESKTOP)
    assert rendered.console == [ConsoleMessage("log", "drawing 3 charts true", "console-api"),
                                ConsoleMessage("warning", "slow", "console-api"),
                                ConsoleMessage("error", "no rows for age 0", "console-api")]
    assert rendered.console_errors == [rendered.console[2]]
    assert rendered.problems == ["console error: no rows for age 0"]


def test_missing_local_image_is_a_failed_load(tmp_path, browser):
    page = write_page(tmp_path, "<img src='figures/missing.png' alt='histogram'>")
    rendered = browser.render(page, **DESKTOP)
    missing = (tmp_path / "figures" / "missing.png").as_uri()
    assert rendered.failed_loads == [FailedLoad(missing, "net::ERR_FILE_NOT_FOUND")]
    assert rendered.network_requests == []
    assert f"failed to load {missing}: net::ERR_FILE_NOT_FOUND" in rendered.problems


def test_network_requests_are_blocked_and_reported(tmp_path, browser):
    page = write_page(tmp_path, "<link rel='stylesheet' href='https://cdn.example.com/style.css'>"
                                "<img src='http://example.com/logo.png' alt='logo'>"
                                "<script>fetch('https://api.example.com/data.json').catch(() => {});</script>")
    rendered = browser.render(page, **DESKTOP)
    assert sorted(rendered.network_requests) == ["http://example.com/logo.png", "https://api.example.com/data.json",
                                                 "https://cdn.example.com/style.css"]
    assert "network request: http://example.com/logo.png" in rendered.problems
    assert {load.url for load in rendered.failed_loads} >= {"http://example.com/logo.png",
                                                           "https://cdn.example.com/style.css"}


def test_screenshots_have_the_requested_width_and_a_full_page_is_taller_than_the_viewport(tmp_path, browser):
    page = write_page(tmp_path, "<h1>Long report</h1>" + "<section style='height: 600px'>a section</section>" * 5)
    for name, viewport in {"desktop": DESKTOP, "narrow": NARROW}.items():
        full = browser.render(page, **viewport, screenshot=tmp_path / f"{name}-full.png")
        assert full.screenshot == tmp_path / f"{name}-full.png"
        assert full.page_width == viewport["width"] and full.page_height > 3000 > viewport["height"]
        assert png_size(full.screenshot) == (viewport["width"], full.page_height)
        visible = browser.render(page, **viewport, screenshot=tmp_path / f"{name}-viewport.png", full_page=False)
        assert png_size(visible.screenshot) == (viewport["width"], viewport["height"])


def test_short_page_screenshot_fills_the_viewport(tmp_path, browser):
    rendered = browser.render(write_page(tmp_path, "<p>short</p>"), **NARROW, screenshot=tmp_path / "short.png")
    assert rendered.page_height == NARROW["height"]
    assert png_size(rendered.screenshot) == (NARROW["width"], NARROW["height"])


def test_content_wider_than_a_narrow_viewport_is_measured(tmp_path, browser):
    rendered = browser.render(write_page(tmp_path, "<table><tr>" + "<td>quasi-identifier</td>" * 8 + "</tr></table>"),
                              **NARROW)
    assert rendered.page_width > NARROW["width"]


def test_svg_chart_is_drawn_in_the_screenshot(tmp_path, browser):
    bars = "".join(f"<rect x='{20 + 60 * i}' y='{200 - h}' width='40' height='{h}' fill='rgb(31, 119, 180)'/>"
                   for i, h in enumerate([50, 120, 80, 160]))
    page = write_page(tmp_path, f"<svg width='300' height='220' viewBox='0 0 300 220' role='img'>{bars}"
                                "<text x='20' y='215'>age</text></svg>")
    rendered = browser.render(page, **NARROW, screenshot=tmp_path / "chart.png")
    assert rendered.problems == []
    image = Image.open(rendered.screenshot).convert("RGB")
    assert any(low < high for low, high in image.getextrema()), "the screenshot is one colour"
    colours = dict((colour, count) for count, colour in image.getcolors(image.width * image.height))
    assert colours.get((31, 119, 180), 0) >= 40 * (50 + 120 + 80 + 160) * 0.9


def test_render_starts_and_stops_its_own_browser(tmp_path):
    rendered = render(write_page(tmp_path, "<p>alone</p>"), **NARROW, screenshot=tmp_path / "alone.png")
    assert rendered.text == "alone" and png_size(tmp_path / "alone.png") == (390, 844)


def browser_processes(workdir: Path) -> list[int]:
    """The live processes started with the browser's temporary folder on their command line."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if str(workdir).encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:  # the process ended meanwhile
                pass
    return found


def test_no_browser_process_outlives_a_page_that_times_out(tmp_path):
    page = write_page(tmp_path, "<p>hangs</p><script>while (true) {}</script>")
    with pytest.raises(TimeoutError, match="the load event of"):
        with Browser(timeout=3) as hanging:
            workdir = hanging.workdir
            assert browser_processes(workdir)
            hanging.render(page, **DESKTOP)
    assert browser_processes(workdir) == []  # the dead ones not yet reaped by init have no command line
    assert not workdir.exists()


def test_missing_browser_skips_outside_ci_and_fails_under_ci(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="install-browser"):
        require_chromium()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="install-browser"):
        require_chromium()
