#!/usr/bin/env bash
# Refresh the web UI's vendored libraries (src/nexus/server/static/vendor/) from the npm registry.
#
# Users never run this: the files it writes are committed, so `nexus serve` needs no Node and no build
# step. A maintainer runs it (Node's `npm` on the PATH) to move to new versions: edit the versions below,
# run it, then run tests/server/test_server_webui*.py, which exercise both libraries in a real Chromium.
set -euo pipefail

MARKDOWN_IT=15.0.3   # Markdown -> HTML (its browser bundle includes entities, linkify-it, mdurl, punycode.js, uc.micro)
DOMPURIFY=3.5.0      # the HTML sanitizer every rendered reply goes through
BUNDLED=(entities@8.1.0 linkify-it@6.1.0 mdurl@2.1.0 punycode.js@2.3.1 uc.micro@3.0.0)

cd "$(dirname "$0")/.."
out=src/nexus/server/static/vendor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

unpack() {  # unpack NAME@VERSION into $work/NAME
  local spec=$1 name=${1%@*}
  (cd "$work" && npm pack --silent "$spec" >/dev/null)
  mkdir -p "$work/$name"
  tar xzf "$work/$(echo "$name" | tr -d '@' | tr '/' '-')-${spec##*@}.tgz" -C "$work/$name" --strip-components=1
}

unpack "markdown-it@$MARKDOWN_IT"
unpack "dompurify@$DOMPURIFY"
for spec in "${BUNDLED[@]}"; do unpack "$spec"; done

mkdir -p "$out"
# The source-map comments are dropped: the maps are not shipped, and a browser would ask for them.
grep -v '^//# sourceMappingURL=' "$work/markdown-it/dist/browser/markdown-it.umd.min.js" > "$out/markdown-it.min.js"
grep -v '^//# sourceMappingURL=' "$work/dompurify/dist/purify.min.js" > "$out/purify.min.js"

licence_of() {  # the licence file of an unpacked package
  find "$work/$1" -maxdepth 1 -iname 'licen[cs]e*' | sort | head -1
}
{
  echo "# Licences of the vendored libraries"
  echo
  echo "\`markdown-it.min.js\` is markdown-it $MARKDOWN_IT's browser bundle, which includes ${BUNDLED[*]}."
  echo "\`purify.min.js\` is DOMPurify $DOMPURIFY (Apache-2.0 or MPL-2.0; the Apache-2.0 text is below)."
  echo "Both are copied unchanged from the npm registry by \`scripts/vendor_ui.sh\` (minus the source-map comment)."
  for name in markdown-it "${BUNDLED[@]%@*}" dompurify; do
    echo
    echo "## $name"
    echo
    echo '```text'
    cat "$(licence_of "$name")"
    echo '```'
  done
} > "$out/LICENSES.md"
ls -l "$out"
