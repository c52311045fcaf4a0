// The packaged extension inside a real VS Code: code-server serves the workbench, Debian's
// Chromium shows it, and playwright-core drives it as a user would. The extension starts the real
// `dg-lsp serve` with the model named by $DG_E2E_MODEL (`make test-vscode`: the tiny random model).
//
//   node run.mjs            (make test-vscode builds the .vsix and runs setup.sh first)
//
// Steps, each with a screenshot in benchmarks/results/vscode/: the status bar item turns ready;
// typing in a Python file shows ghost text, which Tab accepts; "DG: Fill in the middle here"
// from the code-action menu edits the file; "DG: Rewrite paragraph" runs on a Markdown file; a
// rename draws a next-edit suggestion (struck-through and added text), which Tab applies.
// Exits non-zero with the step that failed; the server's output is in the DG output channel's
// log under the temporary user-data folder, which is kept on failure (and with DG_E2E_KEEP=1).
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..', '..');
const VSIX = path.join(ROOT, 'editors', 'vscode', 'dg-lsp.vsix');
const SHOTS = path.join(ROOT, 'benchmarks', 'results', 'vscode');
const CODE_SERVER = path.join(HERE, 'node_modules', '.bin', 'code-server');
const PYTHON = process.env.DG_E2E_PYTHON || path.join(ROOT, '.venv', 'bin', 'python');
const CHROMIUM = process.env.DG_E2E_CHROMIUM || '/usr/bin/chromium';
const MODEL = process.env.DG_E2E_MODEL || 'embedded';
const WAIT = Number(process.env.DG_E2E_WAIT_MS || 120_000);

const GHOST_PY = 'def area(width, height):\n    return \n\n\ndef main():\n    print(area(2, 3))\n';
const RENAME_JS = 'function area(width, height) {\n  return width * height;\n}\n\nconsole.log(area(2, 3));\n';
const NOTES_MD = '# Notes\n\nThis paragraph are the one\nthat get rewritten by the the model.\n\nThis one stays.\n';

function freePort() {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function until(what, fn, timeout = WAIT) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function editorText(page, { ghost = true } = {}) {
  // The rendered lines of the active editor (VS Code renders spaces as non-breaking spaces).
  // Ghost text is drawn inside the line it belongs to; `ghost: false` leaves it out, which is
  // the document's own text.
  return page.evaluate((withGhost) => {
    const editor = document.querySelector('.editor-instance .monaco-editor .view-lines');
    if (!editor) return '';
    const lines = [...editor.querySelectorAll('.view-line')].map((l) => {
      const line = l.cloneNode(true);
      if (!withGhost) line.querySelectorAll('[class*="ghost-text"]').forEach((g) => g.remove());
      return { top: parseFloat(l.style.top), text: line.textContent.replace(/\u00a0/g, ' ') };
    }).sort((a, b) => a.top - b.top);
    return lines.map((l) => l.text).join('\n');
  }, ghost);
}

async function palette(page, command) {
  await page.keyboard.press('F1');
  await page.waitForSelector('.quick-input-widget .quick-input-box input', { timeout: WAIT });
  await page.keyboard.type(command, { delay: 10 });
  await page.waitForSelector(`.quick-input-list .monaco-list-row[aria-label*="${command.replace(/"/g, '')}"]`, { timeout: WAIT });
  await page.keyboard.press('Enter');
}

async function codeAction(page, title) {
  // Ctrl+. opens the code-action menu at the cursor; the server's actions are listed by title.
  // A request that VS Code drops (ghost text or a next-edit suggestion arriving at the same
  // moment) shows "No code actions available"; a user presses Ctrl+. again, and so does this.
  const row = page.locator(`.action-widget .monaco-list-row[aria-label*="${title}"]`).first();
  await until(`"${title}" in the code-action menu`, async () => {
    await page.keyboard.press('Escape');
    await page.keyboard.press('Control+Period');
    try {
      await row.waitFor({ timeout: 5000 });
      return true;
    } catch {
      return false;
    }
  });
  // The menu takes keys, not clicks (a pointer block covers it): move to the row, then Enter.
  for (let i = 0; i < 10 && !((await row.getAttribute('class')) || '').includes('focused'); i++) {
    await page.keyboard.press('ArrowDown');
  }
  await page.keyboard.press('Enter');
}

async function openFile(page, name) {
  await page.keyboard.press('Control+P');
  await page.waitForSelector('.quick-input-widget .quick-input-box input', { timeout: WAIT });
  await page.keyboard.type(name, { delay: 10 });
  await page.waitForSelector(`.quick-input-list .monaco-list-row[aria-label*="${name}"]`, { timeout: WAIT });
  await page.keyboard.press('Enter');
  await until(`${name} in the editor`, async () => (await page.locator('.tab.active').textContent())?.includes(name));
}

async function statusItem(page) {
  // The icon tells the states apart: "DG" alone is both stopped (circle-slash) and ready (check).
  return page.evaluate(() => {
    const items = [...document.querySelectorAll('.statusbar-item')];
    const dg = items.find((i) => /\bDG\b/.test(i.textContent || ''));
    if (!dg) return '';
    const icon = [...dg.querySelectorAll('[class*="codicon-"]')]
      .flatMap((e) => [...e.classList]).find((c) => c.startsWith('codicon-') && c !== 'codicon-modifier-spin');
    return `${icon ? icon.replace('codicon-', '') + ' ' : ''}${dg.textContent.trim()}`;
  });
}

async function main() {
  if (!fs.existsSync(VSIX)) throw new Error(`${VSIX} is missing: run make -C editors/vscode package`);
  fs.mkdirSync(SHOTS, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dg-vscode-e2e-'));
  const userData = path.join(tmp, 'user');
  const extensions = path.join(tmp, 'extensions');
  const workspace = path.join(tmp, 'workspace');
  fs.mkdirSync(path.join(userData, 'User'), { recursive: true });
  fs.mkdirSync(path.join(userData, 'Machine'), { recursive: true });
  fs.mkdirSync(workspace);
  fs.writeFileSync(path.join(workspace, 'ghost.py'), GHOST_PY);
  fs.writeFileSync(path.join(workspace, 'notes.md'), NOTES_MD);
  fs.writeFileSync(path.join(workspace, 'rename.js'), RENAME_JS);
  fs.writeFileSync(path.join(userData, 'User', 'settings.json'), JSON.stringify({
    'dgLsp.server.python': PYTHON,
    'dgLsp.model': MODEL,
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'security.workspace.trust.enabled': false,
    'editor.inlineSuggest.enabled': true,
    // The word-based suggest list would cover the inline suggestion (VS Code hides one under it).
    'editor.quickSuggestions': { other: false, comments: false, strings: false },
    'editor.wordBasedSuggestions': 'off',
    'editor.suggestOnTriggerCharacters': false,
    'telemetry.telemetryLevel': 'off',
    'extensions.autoCheckUpdates': false,
    'update.mode': 'none',
    // Whatever the model proposes is shown: this checks the display, not the model's confidence.
    'dgLsp.nextEdit.minConfidence': 0,
    'dgLsp.nextEdit.onlyImplied': false,
    'dgLsp.nextEdit.debounceMs': 100,
    // Ghost text at the cursor takes Tab first (as it should); the next-edit step runs in a
    // JavaScript file with ghost text off, so Tab there can only mean the suggested edit.
    '[javascript]': { 'editor.inlineSuggest.enabled': false },
  }, null, 2));
  // code-server's window is a remote one: VS Code reads a `machine`-scoped setting such as
  // `dgLsp.server.python` from the remote (Machine) settings there, and honours one left in User
  // settings only some of the time. It goes in both, as a user of a remote window sets it.
  fs.writeFileSync(path.join(userData, 'Machine', 'settings.json'), JSON.stringify({
    'dgLsp.server.python': PYTHON,
  }, null, 2));
  const common = ['--user-data-dir', userData, '--extensions-dir', extensions];
  const install = spawnSync(CODE_SERVER, [...common, '--install-extension', VSIX], { encoding: 'utf8' });
  if (install.status !== 0) throw new Error(`installing the .vsix failed: ${install.stdout}${install.stderr}`);
  const port = await freePort();
  const server = spawn(CODE_SERVER, [...common, '--auth', 'none', '--bind-addr', `127.0.0.1:${port}`,
    '--disable-telemetry', '--disable-workspace-trust', '--disable-update-check', workspace],
  { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, DG_LSP_LOG: process.env.DG_LSP_LOG || 'INFO' } });
  let serverLog = '';
  server.stdout.on('data', (d) => { serverLog += d; });
  server.stderr.on('data', (d) => { serverLog += d; });
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
  const report = { steps: {} };
  let ok = false;
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await until('code-server to listen', async () => {
      try { return (await fetch(`http://127.0.0.1:${port}/healthz`)).ok; } catch { return false; }
    });
    await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(workspace)}`);
    await page.waitForSelector('.monaco-workbench', { timeout: WAIT });

    // 1. Ghost text: type after "return " and wait for VS Code's inline suggestion.
    await openFile(page, 'ghost.py');
    report.steps.status_loading = await until('the DG status bar item', () => statusItem(page));
    await until('the model to be ready', async () => (await statusItem(page)).startsWith('check '));
    report.steps.status_ready = await statusItem(page);
    await page.screenshot({ path: path.join(SHOTS, 'status.png') });
    await page.click('.editor-instance .view-line >> nth=1');
    await page.keyboard.press('End');
    await page.keyboard.type('w', { delay: 50 });
    // Typing asks for ghost text; if that answer came back empty, ask again (Alt+\ is VS Code's
    // "Trigger Inline Suggestion"), as a user would. The same text gets the same answer (fills
    // are cached and the sampler is seeded), so when asking again does not help, type on a
    // little, as a user would too.
    let polls = 0;
    const more = [...'idth'];
    const ghost = await until('ghost text in the editor', async () => {
      const el = await page.$('.ghost-text-decoration, .ghost-text');
      if (el) return (await el.textContent()) || ' ';
      polls += 1;
      if (polls % 60 === 0 && more.length) await page.keyboard.type(more.shift(), { delay: 50 });
      else if (polls % 20 === 0) await page.keyboard.press('Alt+Backslash');
      return null;
    });
    report.steps.ghost = ghost;
    report.steps.typed_on = 4 - more.length;
    await page.screenshot({ path: path.join(SHOTS, 'ghost-text.png') });
    // Accepting is judged on the document's own text: after Tab, VS Code asks again at the new
    // cursor, and the next ghost text may be drawn before any poll sees the line without one.
    // Tab that indented instead (the suggestion withdrawn just before it) adds only whitespace;
    // then the suggestion is waited for and Tab pressed again.
    const typed = (await editorText(page, { ghost: false })).split('\n')[1];
    await page.keyboard.press('Tab');
    let tabs = 1;
    let waits = 0;
    report.steps.accepted = await until('the suggestion to be accepted', async () => {
      const line = (await editorText(page, { ghost: false })).split('\n')[1];
      if (line.trimEnd() !== typed.trimEnd()) return line;
      waits += 1;
      if (line !== typed) {
        await page.keyboard.press('Backspace');
      } else if (waits % 8 === 0 && await page.$('.ghost-text-decoration, .ghost-text')) {
        await page.keyboard.press('Tab');
        tabs += 1;
      }
      return null;
    });
    report.steps.tabs = tabs;

    // 2. "Fill in the middle here" from the code-action menu.
    await page.keyboard.press('Control+End');
    await page.keyboard.press('Enter');
    await page.keyboard.type('def volume(width, height, depth):\n', { delay: 10 });
    const beforeFill = await editorText(page);
    await codeAction(page, 'Fill in the middle here');
    report.steps.filled = await until('the fill to land', async () => {
      const now = await editorText(page);
      return now !== beforeFill ? now : null;
    });
    await page.screenshot({ path: path.join(SHOTS, 'fill-in-the-middle.png') });

    // 3. "DG: Rewrite paragraph" in a Markdown file.
    await openFile(page, 'notes.md');
    await page.click('.editor-instance .view-line >> nth=2');
    const beforeRewrite = await editorText(page);
    await palette(page, 'DG: Rewrite paragraph');
    report.steps.rewritten = await until('the rewrite to land or be refused', async () => {
      const now = await editorText(page);
      if (now !== beforeRewrite) return now;
      // Or the reason nothing changed (the progress toast itself ends in an ellipsis).
      for (const toast of await page.$$('.notifications-toasts .notification-list-item-message')) {
        const text = (await toast.textContent()) || '';
        if (text && !text.endsWith('…')) return `message: ${text}`;
      }
      return null;
    });
    await page.screenshot({ path: path.join(SHOTS, 'rewrite-paragraph.png') });

    // 4. A next-edit suggestion after a rename: drawn in place, accepted with Tab.
    await openFile(page, 'rename.js');
    await page.locator('.editor-instance .view-line >> nth=0').getByText('height').first().dblclick();
    await page.keyboard.type('h', { delay: 20 });
    const renamed = await until('the rename to show', async () => {
      const now = await editorText(page);
      return now.startsWith('function area(width, h)') ? now : null;
    });
    report.steps.next_edit_shown = await until('a next-edit suggestion drawn in the editor', () => page.evaluate(() => {
      const spans = [...document.querySelectorAll('.editor-instance .view-lines span')];
      const struck = spans.filter((e) => getComputedStyle(e).textDecorationLine.includes('line-through')).length;
      const added = spans.filter((e) => !['none', 'normal', ''].includes(getComputedStyle(e, '::after').content)).length;
      return struck + added > 0 ? { struck, added } : null;
    }));
    await page.screenshot({ path: path.join(SHOTS, 'next-edit.png') });
    await page.keyboard.press('Tab');
    report.steps.next_edit_accepted = await until('the suggested edit to be applied', async () => {
      const now = await editorText(page);
      // Tab that indented instead would have put whitespace after the cursor, behind the `h`.
      return now !== renamed && !/h\s+\)/.test(now.split('\n')[0]) ? now : null;
    });
    report.steps.status_after = await statusItem(page);
    ok = true;
  } catch (error) {
    const page = browser.contexts()[0]?.pages()[0];
    if (page) await page.screenshot({ path: path.join(tmp, 'failure.png') }).catch(() => {});
    throw error;
  } finally {
    fs.writeFileSync(path.join(SHOTS, 'report.json'), JSON.stringify({ ok, model: MODEL, ...report }, null, 2));
    await browser.close();
    server.kill('SIGTERM');
    if (!ok || process.env.DG_E2E_KEEP) {
      if (!ok) console.error(serverLog.slice(-4000));
      console.error(`kept ${tmp} for inspection`);
    } else {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  }
  console.log(JSON.stringify(report, null, 2));
}

main().catch((error) => {
  console.error(`VS Code end-to-end test failed: ${error.message}`);
  process.exit(1);
});
