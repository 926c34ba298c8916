"""`run.py dashboard`: ZenML's dashboard on 127.0.0.1, opened in a real browser on a finished run's report."""

import re
import shutil
import socket
import urllib.error
import urllib.request

import psutil
import pytest

import run
from tests.conftest import MINILM
from tests.projects import write_project

DOCUMENTS = {
    "tea.md": "# Tea\nGreen tea is steeped at about 80 degrees Celsius for two to three minutes.",
    "rust.md": "# Rust\nIron rusts when oxygen and water turn it into iron oxide.",
}
CASES = [
    {"id": "steep", "question": "How hot should the water be for green tea?", "expected_sources": ["tea.md"]},
    {"id": "oxide", "question": "Why does iron corrode?", "expected_sources": ["rust.md"]},
]
CHROMIUM = next((path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listening_addresses(port: int) -> set[str]:
    return {
        connection.laddr.ip
        for connection in psutil.net_connections(kind="tcp")
        if connection.status == psutil.CONN_LISTEN and connection.laddr.port == port
    }


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium on this machine and set-up could not install it (`apt-get install chromium` "
    "as root on Debian; see docs/project/tests-and-benchmarks.md)",
)
@pytest.mark.slow
def test_dashboard_shows_a_finished_runs_report_in_a_real_browser(tmp_path, monkeypatch, capsys):
    from playwright.sync_api import sync_playwright

    monkeypatch.chdir(tmp_path)
    write_project(
        tmp_path,
        DOCUMENTS,
        CASES,
        "name: dashboard-test\n"
        f"grid: {{chunk_size: 64, embedding_model: {MINILM}, top_k: 2, reader: []}}\n"
        "retrieval: {metrics_k: 1}\n",
    )
    assert run.main(["--config", "config.yaml"]) == 0
    capsys.readouterr()
    port = free_port()
    assert run.main(["dashboard", "--port", str(port)]) == 0
    try:
        out = capsys.readouterr().out
        url = f"http://127.0.0.1:{port}"
        assert f"ZenML dashboard: {url}" in out
        assert listening_addresses(port) == {"127.0.0.1"}
        run_page = re.search(rf"newest benchmark run: ({re.escape(url)}/projects/default/runs/\S+)", out)
        assert run_page, out
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(run_page.group(1))
                page.get_by_text("ResultsTable", exact=True).click()  # the results artifact in the graph
                assert "/survey" not in page.url  # no onboarding detour
                page.get_by_role("tab", name="Visualization").click()
                page.get_by_role("button", name="Load Preview").click()
                report = page.frame_locator("iframe").first
                headline = report.locator("table", has_text="MRR").first
                headline.wait_for(timeout=30_000)
                assert "dashboard-test" in report.locator("h1").inner_text()
                assert headline.locator("td", has_text=MINILM).count() >= 1  # the cell's row
                chart = report.locator("svg").first
                chart.scroll_into_view_if_needed()
                box = chart.bounding_box()
                assert box and box["width"] > 200 and box["height"] > 40  # laid out, not collapsed
                assert chart.locator("path").count() > 5  # axes and bars drawn (matplotlib's SVG paths)
                assert "MRR" in chart.inner_html()  # the chart of the headline scores
                page.screenshot(path=str(tmp_path / "dashboard.png"))
            finally:
                browser.close()
    finally:
        assert run.main(["dashboard", "--stop"]) == 0
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)
    assert run.main(["--config", "config.yaml"]) == 0  # the client is back on the local store
