"""Screenshots of the built site (``make docs-screenshots``): serve ``site/`` on 127.0.0.1 (a free port) and
take one PNG per page with headless Chromium, to see how the pages render without a browser at hand.

    python docs/hooks/screenshots.py [--site site] [--out site-screenshots] [--chromium PATH] [PAGE ...]

PAGE: a path inside the site (default: the home page, the API overview and a CLI page). The window is
1280 pixels wide and ``--height`` tall (900; a taller one shows more of a long page). Each PNG is named
after its page (``index.png``, ``reference-api.png``...). Needs Chromium (``/usr/bin/chromium`` or
``--chromium``; without one it says what to install in one line, exit 2); nothing is fetched from the network (the site's fonts fall back to the system's).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("", "reference/api/", "cli/eval/sts/")
#: Headless, no network of its own, no state kept between runs.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def png_name(page: str) -> str:
    """``reference/api/`` -> ``reference-api.png``; the home page -> ``index.png``."""
    return (page.strip("/").replace("/", "-") or "index") + ".png"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", default=list(PAGES), help="paths inside the site")
    parser.add_argument("--site", type=Path, default=ROOT / "site", help="the built site (make docs)")
    parser.add_argument("--out", type=Path, default=ROOT / "site-screenshots", help="where the PNGs go")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--height", type=int, default=900, help="window height in pixels")
    parser.add_argument("--timeout", type=float, default=60, help="seconds per page")
    args = parser.parse_args(argv)
    if shutil.which(args.chromium) is None:
        print(
            f"screenshots: no Chromium at {args.chromium}: install the Debian package (apt-get install "
            "chromium) or playwright's browser (python -m playwright install chromium) and pass its "
            "executable with --chromium PATH",
            file=sys.stderr,
        )
        return 2
    if not (args.site / "index.html").is_file():
        print(
            f"screenshots: {args.site}/index.html not found: build the site first (make docs)",
            file=sys.stderr,
        )
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(QuietHandler, directory=str(args.site))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.server_address[1]
        for page in args.pages:
            target = args.out / png_name(page)
            with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
                subprocess.run(
                    [
                        args.chromium,
                        *CHROMIUM_FLAGS,
                        f"--window-size=1280,{args.height}",
                        f"--user-data-dir={profile}",
                        f"--screenshot={target}",
                        f"http://127.0.0.1:{port}/{page}",
                    ],
                    check=True,
                    capture_output=True,
                    timeout=args.timeout,
                )
            print(target)
        server.shutdown()
    return 0


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the site without a log line per request."""

    def log_message(self, format: str, *args: object) -> None:
        pass


if __name__ == "__main__":
    sys.exit(main())
