#!/usr/bin/env bash
# Renders the HTML egress report of a made-up sample month (the one
# egress/sample_test.go builds) and takes a screenshot of the
# whole page with headless Chromium: docs/images/egress-report.png.
# Needs chromium (Debian: apt-get install chromium). Not part of make test.
set -euo pipefail
cd "$(dirname "$0")/.."
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [[ -z $browser ]]; then
	echo "egress-screenshot: no chromium on PATH (Debian: apt-get install chromium)" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "rendering the sample report..." >&2
FEDGATE_SAMPLE_HTML="$tmp/report.html" go test -count=1 -run '^TestSampleReportHTML$' ./egress/ >&2
echo "taking the screenshot..." >&2
"$browser" --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1100,1380 \
	--screenshot="$tmp/report.png" "file://$tmp/report.html" 2>/dev/null
mkdir -p docs/images
cp "$tmp/report.png" docs/images/egress-report.png
echo "wrote docs/images/egress-report.png" >&2
