#!/usr/bin/env bash
# Renders the help centre's image documents (images/src/*.html) and the example query screenshot
# (query-examples/*.html) to PNG with headless Chromium. The app never reads the HTML: it reads
# the text back out of the PNGs with tesseract.
set -euo pipefail
cd "$(dirname "$0")"
for page in images/src/*.html query-examples/*.html; do
  dir=$(dirname "$page"); dir=${dir%/src}
  size=900,420; [ "$dir" = query-examples ] && size=1200,220
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=$size \
    --screenshot="$PWD/$dir/$(basename "$page" .html).png" "file://$PWD/$page" 2>/dev/null
done
