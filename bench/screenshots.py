"""The screenshots of the README and docs/pages.md: build the demo brain from docs/vault, serve it with
Datasette on loopback (with metadata.yml, as the quick start does), and save PNGs of
the recall, memory, entity and decayed pages into docs/screenshots/, taken with
Playwright driving Debian's chromium.

    python3 bench/screenshots.py [--out docs/screenshots] [--width 1280] [--max-height 1600]

Needs `pip install -e '.[test]'` (Playwright) and `apt-get install chromium`.
Run it again whenever the pages or the demo vault change.
"""

import argparse
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERY = "who owns the support runbook?"
SCOPE = "/acme/support"


def build(folder):
    """The quick start's demo brain in `folder`: demo.db."""
    path = folder / "demo.db"
    subprocess.run(
        [
            sys.executable,
            "-c",
            "from sqlite_utils.cli import cli; cli()",
            "brain",
            "ingest",
            str(path),
            str(ROOT / "docs" / "vault"),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        cwd=ROOT,
    )
    return path


def serve(path):
    """(process, base url) of Datasette serving `path` on a free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "datasette",
            str(path),
            "-m",
            str(ROOT / "metadata.yml"),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(base + "/-/versions.json", timeout=1)
            return process, base
        except OSError:
            time.sleep(0.1)
    process.terminate()
    raise SystemExit("datasette did not start")


def ids(path):
    """(the support runbook's first memory, Dana Whitfield's entity) ids."""
    conn = sqlite3.connect(path)
    try:
        [(memory,)] = conn.execute("select id from knowledge where heading_path = 'Support Runbook'").fetchall()
        [(entity,)] = conn.execute("select id from entities where name = 'Dana Whitfield'").fetchall()
    finally:
        conn.close()
    return memory, entity


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=900, help="the browser window's height")
    parser.add_argument("--max-height", type=int, default=1600, help="a taller page is cut here")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("needs Debian's chromium: apt-get install chromium")
    from urllib.parse import urlencode

    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        path = build(Path(folder))
        memory, entity = ids(path)
        process, base = serve(path)
        pages = {
            "recall.png": f"/demo/-/brain?{urlencode({'q': QUERY, 'scope': SCOPE})}",
            "memory.png": f"/demo/-/memory/{memory}",
            "entity.png": f"/demo/-/entity/{entity}",
            "decayed.png": "/demo/-/decayed",
        }
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=chromium,
                    args=[
                        "--no-sandbox",
                        "--disable-gpu",
                        "--disable-background-networking",
                        "--disable-component-update",
                        "--disable-sync",
                        "--no-first-run",
                        "--disable-quic",
                    ],
                )
                page = browser.new_page(viewport={"width": args.width, "height": args.height})
                for name, url in pages.items():
                    response = page.goto(base + url)
                    if response is None or response.status != 200:
                        raise SystemExit(f"{url}: {response and response.status}")
                    page.wait_for_load_state("networkidle")
                    height = min(page.evaluate("document.documentElement.scrollHeight"), args.max_height)
                    page.screenshot(
                        path=str(out / name),
                        full_page=True,
                        clip={"x": 0, "y": 0, "width": args.width, "height": height},
                    )
                    print(out / name)
                browser.close()
        finally:
            process.terminate()
            process.wait(10)


if __name__ == "__main__":
    main()
