#!/usr/bin/env bash
# Installs what `make test-vscode` runs on: code-server (a real VS Code, from the npm registry),
# Debian's Chromium, and playwright-core to drive it (no browser download).
#
# code-server's own post-install step fetches two things from GitHub (the ripgrep binary and, in
# some versions, a git dependency), which a machine limited to the package registries cannot
# reach. So the packages are installed without their scripts, and the steps those scripts do are
# done here: the native modules VS Code's server needs are built from source with node-gyp,
# Debian's `rg` stands in for the downloaded ripgrep, and the links the script makes are made.
# Version 4.99.4 (VS Code 1.99) is the newest whose dependencies all come from the registry and
# whose Node engine is the Node 20 these machines have.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

missing=()
for pkg in chromium ripgrep libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev pkg-config build-essential; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
    else
        echo "missing Debian packages: ${missing[*]} (apt-get install them)" >&2
        exit 2
    fi
fi

[ -f node_modules/.dg-installed ] && exit 0
npm install --no-audit --no-fund --ignore-scripts
npm rebuild argon2
vscode=node_modules/code-server/lib/vscode
(cd "$vscode" && npm install --omit=dev --ignore-scripts --no-audit --no-fund)
mkdir -p "$vscode/node_modules/@vscode/ripgrep/bin"
ln -sf "$(command -v rg)" "$vscode/node_modules/@vscode/ripgrep/bin/rg"
(cd "$vscode" && npm rebuild @vscode/spdlog kerberos native-watchdog @parcel/watcher)
# node-pty's post-install step runs after its build and asks npx for node-gyp, which fails
# offline; the built module is what counts, so that failure is checked by the module's presence.
(cd "$vscode" && npm rebuild node-pty >/dev/null 2>&1 || true)
[ -f "$vscode/node_modules/node-pty/build/Release/pty.node" ] || { echo "node-pty did not build" >&2; exit 1; }
rm -rf "$vscode/node_modules.asar" && ln -s node_modules "$vscode/node_modules.asar"
(cd "$vscode/bin/remote-cli" && ln -sf code-linux.sh code-server)
(cd "$vscode/bin/helpers" && ln -sf browser-linux.sh browser.sh)
(cd "$vscode/extensions" && npm install --omit=dev --ignore-scripts --no-audit --no-fund)
node_modules/.bin/code-server --version
touch node_modules/.dg-installed
