#!/bin/sh
# Re-fetch the browser assets under static/vendor/ from the npm registry (no CDN at run time:
# the machines AgentSys runs on may have no internet). Bump a version here, run this, and
# update static/vendor/README.md (versions, licences, sha256sum output).
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent htmx.org@2.0.11 uplot@1.6.32 marked@18.2.1 dompurify@3.4.18 >/dev/null)
for tgz in "$tmp"/*.tgz; do tar xzf "$tgz" -C "$tmp" && mv "$tmp/package" "${tgz%.tgz}"; done
mkdir -p static/vendor/htmx-2.0.11 static/vendor/uplot-1.6.32 static/vendor/marked-18.2.1 \
         static/vendor/dompurify-3.4.18
cp "$tmp"/htmx.org-2.0.11/dist/htmx.min.js "$tmp"/htmx.org-2.0.11/LICENSE static/vendor/htmx-2.0.11/
cp "$tmp"/uplot-1.6.32/dist/uPlot.iife.min.js "$tmp"/uplot-1.6.32/dist/uPlot.min.css \
   "$tmp"/uplot-1.6.32/LICENSE static/vendor/uplot-1.6.32/
# Their source maps too: each file names its map, which collectstatic (whitenoise) requires.
cp "$tmp"/marked-18.2.1/lib/marked.umd.js "$tmp"/marked-18.2.1/lib/marked.umd.js.map \
   "$tmp"/marked-18.2.1/LICENSE static/vendor/marked-18.2.1/
cp "$tmp"/dompurify-3.4.18/dist/purify.min.js "$tmp"/dompurify-3.4.18/dist/purify.min.js.map \
   "$tmp"/dompurify-3.4.18/LICENSE static/vendor/dompurify-3.4.18/
sha256sum static/vendor/*/*.js static/vendor/*/*.css
