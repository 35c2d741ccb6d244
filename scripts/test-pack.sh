#!/usr/bin/env bash
# The package as a user gets it: `npm pack`, then `npm install ./leasehold-*.tgz`
# in an empty project (compiling better-sqlite3 again when no prebuilt binary
# fits, about a minute), then the installed CLI's --version and the README's
# in-process example (app.mjs) against a coordinator started from the installed
# package. Also checks that the tarball holds only what package.json `files`
# lists. Exit 0 when all of it works.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/leasehold-pack-XXXXXX")"
serve_pid=""
cleanup() {
  if [ -n "$serve_pid" ]; then kill "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cd "$root"
tarball="$(npm pack --silent --pack-destination "$work" | tail -n 1)"
version="$(node -p "require('./package.json').version")"
echo "packed $tarball"

# Only dist/src, bin, ui (the dashboard), README.md, LICENSE, CHANGELOG.md (when present) and package.json.
unexpected="$(tar -tzf "$work/$tarball" | grep -Ev '^package/(dist/src/|bin/|ui/|README\.md$|LICENSE$|CHANGELOG\.md$|package\.json$)' || true)"
if [ -n "$unexpected" ]; then echo "the tarball holds files outside package.json files:" >&2; echo "$unexpected" >&2; exit 1; fi
echo "tarball holds $(tar -tzf "$work/$tarball" | wc -l | tr -d ' ') files, all listed"

# The README's in-process example, exactly as the README shows it.
node --input-type=module -e '
  import { readFileSync, writeFileSync } from "node:fs";
  const readme = readFileSync(process.argv[1], "utf8");
  const block = /^```js[ \t]+readme-file=app\.mjs[ \t]*\n([\s\S]*?)^```/m.exec(readme);
  if (block === null) { console.error("README.md has no readme-file=app.mjs block"); process.exit(1); }
  writeFileSync(process.argv[2], block[1]);
' "$root/README.md" "$work/app.mjs"

cd "$work"
npm init -y >/dev/null
npm install --prefer-offline --no-audit --no-fund --loglevel=error "./$tarball"

shown="$(npx --no-install leasehold --version)"
[ "$shown" = "$version" ] || { echo "leasehold --version printed '$shown', expected '$version'" >&2; exit 1; }
echo "leasehold --version: $shown"

key="$(npx --no-install leasehold keys create --db ./jobs.db --create --tenant demo --user app --role admin --quiet)"
# The installed binary itself, not through npx: then $! is the server, which the cleanup stops.
./node_modules/.bin/leasehold serve --db ./jobs.db --port 0 > serve.log 2>&1 &
serve_pid=$!
url=""
for _ in $(seq 1 100); do
  url="$(grep -o 'listening on http://[0-9.:]*' serve.log | head -n 1 | sed 's/listening on //' || true)"
  [ -n "$url" ] && break
  kill -0 "$serve_pid" 2>/dev/null || { cat serve.log >&2; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "serve did not start:" >&2; cat serve.log >&2; exit 1; }

# The dashboard's files come from the installed package.
ui_page="$(node -e 'fetch(process.argv[1]).then(async (r) => { const t = await r.text(); console.log(r.status, t.includes("/ui/assets/app.js") ? "app.js" : "-"); })' "$url/ui")"
[ "$ui_page" = "200 app.js" ] || { echo "GET /ui from the installed package answered '$ui_page'" >&2; exit 1; }
ui_script="$(node -e 'fetch(process.argv[1]).then((r) => console.log(r.status, r.headers.get("content-type")))' "$url/ui/assets/app.js")"
case "$ui_script" in "200 text/javascript"*) ;; *) echo "GET /ui/assets/app.js answered '$ui_script'" >&2; exit 1 ;; esac
echo "dashboard: /ui and its scripts served from the package"

out="$(LEASEHOLD_URL="$url" LEASEHOLD_KEY="$key" timeout 60 node app.mjs)"
echo "app.mjs: $out"
[ "$out" = 'succeeded {"hello":"Ada"}' ] || { echo "the in-process example printed '$out'" >&2; exit 1; }
echo "pack test passed"
