// Smoke test of the bundled extension (dist/extension.js) without VS Code: the `vscode` module is
// replaced by test/vscode-stub.js and the server by test/fake-server.py, a scripted LSP server that
// logs what it receives. It checks the wiring that type-checking cannot: the process that gets
// spawned, the initializationOptions and didChangeConfiguration payloads, the executeCommand
// arguments, cancellation, the custom notifications, and the failure and crash handling.
//
//   node test/smoke.js              all scenarios, each in a fresh Node process
//   node test/smoke.js <scenario>   one scenario (SMOKE_VERBOSE=1 prints every UI event)
'use strict';
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const Module = require('node:module');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const FAKE_SERVER = path.join(__dirname, 'fake-server.py');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const scenarios = { happy, nextEdit, missingCommand, startFails, crashes, hungRestart, pythonInterpreter };

if (process.argv[2] === undefined) {
  let failed = 0;
  for (const name of Object.keys(scenarios)) {
    const started = Date.now();
    const run = spawnSync(process.execPath, [__filename, name], { encoding: 'utf8', timeout: 90_000 });
    const ok = run.status === 0;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${name} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    if (!ok) {
      failed++;
      process.stdout.write(run.stdout + run.stderr + (run.error ? String(run.error) : ''));
    }
  }
  process.exit(failed === 0 ? 0 : 1);
} else {
  runScenario(process.argv[2]).then(
    () => process.exit(0),
    (error) => { console.error(error); process.exit(1); },
  );
}

async function runScenario(name) {
  const scenario = scenarios[name];
  if (!scenario) throw new Error(`unknown scenario ${name}`);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dg-vscode-smoke-'));
  process.env.FAKE_LOG = path.join(tmp, 'server.log');

  // Resolve `require('vscode')` inside the bundle to the stub.
  const stub = path.join(__dirname, 'vscode-stub.js');
  const resolve = Module._resolveFilename;
  Module._resolveFilename = function (request, ...rest) {
    return request === 'vscode' ? stub : resolve.call(this, request, ...rest);
  };
  const vscode = require('vscode');
  const t = vscode.__testing;
  const extension = require(path.join(ROOT, 'dist', 'extension.js'));

  const file = path.join(tmp, 'a.py');
  const document = t.makeDocument(file, 'python', 'def f():\n    pass\n');
  const editor = t.makeEditor(document, new vscode.Selection(new vscode.Position(1, 4), new vscode.Position(1, 4)));
  vscode.workspace.textDocuments.push(document);
  vscode.window.activeTextEditor = editor;
  vscode.window.visibleTextEditors = [editor];

  const ctx = {
    vscode, t, tmp, editor, document, extension,
    uri: `file://${file}`,
    status: () => t.statusItems[0].text,
    tooltip: () => String(t.statusItems[0].tooltip),
    events: (kind) => t.events.filter((e) => e.kind === kind).map((e) => e.data),
    received: () => (fs.existsSync(process.env.FAKE_LOG)
      ? fs.readFileSync(process.env.FAKE_LOG, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
      : []),
    activate: () => extension.activate({ subscriptions: [], extensionPath: ROOT }),
    waitFor: async (what, predicate, timeoutMs = 30_000) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const value = predicate();
        if (value) return value;
        if (Date.now() > deadline) {
          throw new Error(`timed out waiting for ${what}; status "${ctx.status()}"; events:\n` +
            t.events.map((e) => `  ${e.kind} ${typeof e.data === 'string' ? e.data : JSON.stringify(e.data)}`).join('\n'));
        }
        await sleep(25);
      }
    },
  };
  ctx.requests = (method) => ctx.received().filter((m) => m.method === method);
  ctx.commandCalls = () => ctx.requests('workspace/executeCommand').map((m) => m.params);
  try {
    await scenario(ctx);
  } finally {
    await extension.deactivate();
  }
}

async function nextEdit(c) {
  const { vscode, t, document } = c;
  useFakeServer(t);
  t.setSetting('dgLsp.nextEdit.debounceMs', 50);
  c.activate();
  await c.waitFor('ready status', () => c.status() === '$(check) DG 42 ms');
  const visible = () => c.events('builtinCommand').filter((e) => e[0] === 'setContext' && e[1] === 'dgLsp.nextEditVisible').at(-1)?.[2];

  // The user's edit; after the pause the extension asks at the cursor and draws the answer.
  document.type('def f():\n    pas\n');
  await c.waitFor('dg/nextEdit', () => c.requests('dg/nextEdit').length === 1);
  assert.deepEqual(c.requests('dg/nextEdit')[0].params, { textDocument: { uri: c.uri }, position: { line: 1, character: 4 } });
  await c.waitFor('the suggestion drawn', () => visible() === true);
  const drawn = c.events('decorations').slice(-2);
  assert.deepEqual(drawn, [['line-through 1:4-1:7'], ['pass']]);

  // Tab (dgLsp.acceptNextEdit) applies exactly the suggested edit and hides it.
  assert.equal(await vscode.commands.executeCommand('dgLsp.acceptNextEdit'), true);
  assert.deepEqual(c.events('applyEdit').at(-1).entries, [[c.uri, '1:4-1:7', 'pass']]);
  assert.equal(visible(), false);
  assert.equal(await vscode.commands.executeCommand('dgLsp.acceptNextEdit'), false, 'nothing left to accept');

  // Escape hides it without touching the document.
  document.type('def f():\n    pas\n');
  await c.waitFor('a second suggestion', () => c.requests('dg/nextEdit').length === 2 && visible() === true);
  const applied = c.events('applyEdit').length;
  await vscode.commands.executeCommand('dgLsp.dismissNextEdit');
  assert.equal(visible(), false);
  assert.equal(c.events('applyEdit').length, applied);

  // An edit while the server computes cancels the request; the late answer is never drawn.
  document.type('def f():\n    pas\n# slow\n');
  await c.waitFor('the slow request', () => c.requests('dg/nextEdit').length === 3);
  document.type('def f():\n    pas\n# slow, edited\n');
  await c.waitFor('$/cancelRequest', () => c.requests('$/cancelRequest').length > 0);
  await c.waitFor('the fourth request', () => c.requests('dg/nextEdit').length === 4);
  await c.waitFor('its suggestion', () => visible() === true, 5000);
  assert.deepEqual(c.events('decorations').slice(-2), [['line-through 1:4-1:7'], ['pass']]);

  // Turned off, an edit asks nothing.
  await vscode.commands.executeCommand('dgLsp.dismissNextEdit');
  t.setSetting('dgLsp.nextEdit.enabled', false);
  document.type('def f():\n    pas\n');
  await sleep(400);
  assert.equal(c.requests('dg/nextEdit').length, 4);
}

function useFakeServer(t) {
  t.setSetting('dgLsp.server.command', FAKE_SERVER);
}

const EXPECTED_SETTINGS = {
  model: 'embedded',
  device: 'auto',
  dtype: 'auto',
  quantization: 'auto',
  canvasLength: 0,
  maxSteps: 0,
  leadBeam: 0,
  entropyBound: 0,
  candidates: 1,
  contextBudget: 2048,
  crossFileContext: true,
  languages: ['python', 'javascript', 'typescript', 'javascriptreact', 'typescriptreact', 'rust', 'go', 'c', 'cpp', 'java', 'markdown'],
  holeMarkers: ['TODO(dg)'],
  inline: { enabled: true, validOnly: false, repairBudgetMs: 250 },
  drafts: true,
  confidence: { threshold: 0.3, display: 'diagnostics' },
  syntaxRepair: true,
  repairRounds: 2,
  variableLength: true,
  jointHoles: true,
  nextEdit: { enabled: true, minConfidence: 0.5, onlyImplied: true, debounceMs: 300 },
  adapter: 'off',
};

async function happy(c) {
  const { vscode, t, editor } = c;
  useFakeServer(t);
  t.setSetting('dgLsp.drafts', true);
  c.activate();
  await c.waitFor('ready status', () => c.status() === '$(check) DG 42 ms');

  // The same object, minus server.* and trace.*, at initialize and on every settings change.
  const [initialize] = c.requests('initialize');
  assert.deepEqual(initialize.params.initializationOptions, EXPECTED_SETTINGS);
  await c.waitFor('initial settings push', () => c.requests('workspace/didChangeConfiguration').length > 0);
  assert.deepEqual(c.requests('workspace/didChangeConfiguration')[0].params, { settings: { dgLsp: EXPECTED_SETTINGS } });
  assert.equal(c.requests('textDocument/didOpen')[0].params.textDocument.uri, c.uri);
  assert.ok(c.events('registerInlineCompletion').length > 0, 'inline completion provider registered');

  // Fill at the cursor: empty range, mode fim; the draft is drawn, then cleared.
  await vscode.commands.executeCommand('dgLsp.fillHere');
  const pos = (line, character) => ({ line, character });
  assert.deepEqual(c.commandCalls().at(-1), {
    command: 'dg.infill',
    arguments: [{ uri: c.uri, range: { start: pos(1, 4), end: pos(1, 4) }, mode: 'fim' }],
  });
  assert.deepEqual(c.events('decorations').slice(0, 1), [['x = 1 ⏎ y']]);
  assert.deepEqual(c.events('decorations').at(-1), []);
  assert.deepEqual(c.events('statusMessage').at(-1), 'DG: done in 17 ms');

  // Holes without a selection cover the whole document; a non-applied result is shown.
  await vscode.commands.executeCommand('dgLsp.fillHoles');
  assert.deepEqual(c.commandCalls().at(-1).arguments[0].range, { start: pos(0, 0), end: pos(2, 0) });
  assert.equal(c.events('warning').at(-1), 'DG: no holes found');

  // Rewrite: the instruction is sent only when one was typed; Escape sends nothing.
  editor.selection = new vscode.Selection(new vscode.Position(0, 0), new vscode.Position(1, 8));
  t.answers.inputBox = 'make it iterative';
  await vscode.commands.executeCommand('dgLsp.rewriteSelection');
  assert.deepEqual(c.commandCalls().at(-1).arguments[0], {
    uri: c.uri, range: { start: pos(0, 0), end: pos(1, 8) }, mode: 'rewrite', instruction: 'make it iterative',
  });
  t.answers.inputBox = '';
  await vscode.commands.executeCommand('dgLsp.rewriteSelection');
  assert.equal('instruction' in c.commandCalls().at(-1).arguments[0], false);
  const before = c.commandCalls().length;
  t.answers.inputBox = undefined;
  await vscode.commands.executeCommand('dgLsp.rewriteSelection');
  await sleep(200);
  assert.equal(c.commandCalls().length, before, 'Escape in the input box sends no request');

  // Learn this repository: the folder (none open here) and the minutes setting go to the server.
  await vscode.commands.executeCommand('dgLsp.learnRepository');
  assert.deepEqual(c.commandCalls().at(-1), { command: 'dg.learnRepository', arguments: [{ minutes: 20 }] });
  assert.equal(c.events('info').at(-1), 'DG: learning for 20 minutes');
  await vscode.commands.executeCommand('dgLsp.stopLearning');
  assert.deepEqual(c.commandCalls().at(-1), { command: 'dg.stopLearning', arguments: [{}] });
  assert.equal(c.events('warning').at(-1), 'DG: nothing is being learned');

  await vscode.commands.executeCommand('dgLsp.rewriteParagraph');
  assert.deepEqual(c.commandCalls().at(-1), {
    command: 'dg.rewriteParagraph', arguments: [{ uri: c.uri, position: pos(1, 8) }],
  });

  // Cancelling the progress notification cancels the request on the server, silently.
  const messagesBefore = c.events('warning').length + c.events('error').length;
  const body = vscode.commands.executeCommand('dgLsp.completeBody');
  await c.waitFor('body request', () => c.commandCalls().some((p) => p.arguments[0].mode === 'body'));
  t.cancelLastProgress();
  await body;
  await c.waitFor('$/cancelRequest', () => c.requests('$/cancelRequest').length > 0);
  await sleep(700); // the fake answers the cancelled request late; that must not surface either
  assert.equal(c.events('warning').length + c.events('error').length, messagesBefore);

  await vscode.commands.executeCommand('dgLsp.showStatus');
  const rows = c.events('quickPick').at(-1);
  for (const row of ['$(check) State = ready', 'Model = embedded', 'Parameters = 123 M', 'Memory = 512.0 MiB', 'Last latency: infill = 310 ms']) {
    assert.ok(rows.includes(row), `status row ${row} in ${JSON.stringify(rows)}`);
  }

  // An ordinary setting goes to the running server; `languages` restarts it with the new list.
  t.setSetting('dgLsp.candidates', 3);
  await c.waitFor('candidates change', () => c.requests('workspace/didChangeConfiguration').some((m) => m.params.settings.dgLsp.candidates === 3));
  t.setSetting('dgLsp.languages', ['python']);
  await c.waitFor('restart with new languages', () => c.requests('initialize').length === 2);
  assert.deepEqual(c.requests('initialize')[1].params.initializationOptions.languages, ['python']);
  assert.equal(c.requests('exit').length, 1, 'the first server was shut down');
  await c.waitFor('ready again', () => c.status() === '$(check) DG 42 ms');

  assert.deepEqual(c.events('error'), [], 'no error messages');
}

async function missingCommand(c) {
  c.t.setSetting('dgLsp.server.command', 'dg-lsp-that-does-not-exist');
  c.activate();
  await c.waitFor('error status', () => c.status() === '$(error) DG error');
  const [message] = c.events('error');
  assert.match(message, /`dg-lsp-that-does-not-exist` \(from `dgLsp.server.command`\) was not found on PATH/);
  assert.match(message, /pip install dg-lsp/);
  assert.match(message, /dgLsp\.server\.python/);
  assert.match(c.tooltip(), /was not found on PATH/);
}

async function startFails(c) {
  // A server that exits at once: reported once, with our hint, and not respawned in a loop.
  c.t.setSetting('dgLsp.server.command', process.execPath);
  c.t.setSetting('dgLsp.server.args', ['-e', 'process.exit(3)']);
  c.activate();
  await c.waitFor('error status', () => c.status() === '$(error) DG error');
  await c.waitFor('our message', () => c.events('error').some((m) => /failed to start/.test(m)));
  await sleep(1500);
  const spawned = c.events('log').filter((l) => l.startsWith('info: Starting ')).length;
  assert.equal(spawned, 1, 'spawned once');

  // Fixing the setting starts it again without a reload.
  c.t.setSetting('dgLsp.server.args', ['serve']);
  useFakeServer(c.t);
  await c.waitFor('ready after fix', () => c.status() === '$(check) DG 42 ms');
}

async function crashes(c) {
  const { vscode, t, editor } = c;
  useFakeServer(t);
  c.activate();
  await c.waitFor('ready status', () => c.status() === '$(check) DG 42 ms');
  editor.selection = new vscode.Selection(new vscode.Position(0, 0), new vscode.Position(1, 8));
  for (let crash = 1; crash <= 4; crash++) {
    t.answers.inputBox = 'crash';
    await vscode.commands.executeCommand('dgLsp.rewriteSelection');
    assert.match(c.events('error').at(-1), /the server stopped while working on it/);
    if (crash < 4) {
      // Restarted quietly by the crash policy.
      await c.waitFor(`restart ${crash}`, () => c.requests('initialize').length === crash + 1);
      await c.waitFor(`ready after crash ${crash}`, () => c.status() === '$(check) DG 42 ms');
    }
  }
  await c.waitFor('gave up', () => c.events('error').some((m) => /will not be restarted automatically/.test(m)));
  await c.waitFor('error status', () => c.status() === '$(error) DG error');
  assert.equal(c.requests('initialize').length, 4);

  // An explicit restart works after giving up.
  await vscode.commands.executeCommand('dgLsp.restartServer');
  await c.waitFor('ready after restart', () => c.status() === '$(check) DG 42 ms');
}

async function hungRestart(c) {
  // A server that never answers `initialize` (but exits when its stdin closes, as a real one does).
  c.t.setSetting('dgLsp.server.command', process.execPath);
  c.t.setSetting('dgLsp.server.args', ['-e', "process.stdin.resume(); process.stdin.on('end', () => process.exit(0))"]);
  c.activate();
  await c.waitFor('starting status', () => c.status() === '$(loading~spin) DG starting');
  // Pointing the setting at a working server restarts without waiting for the hung start forever.
  c.t.setSetting('dgLsp.server.args', ['serve']);
  useFakeServer(c.t);
  await c.waitFor('ready after restart', () => c.status() === '$(check) DG 42 ms', 15_000);
  // Both changes share one restart: the hung server is ended and one working server is started.
  assert.equal(c.events('log').filter((l) => l.startsWith('info: Starting ')).length, 2);
  await c.waitFor('hung server ended', () => c.events('log').some((l) => /^info: Server process \d+ was killed by SIGTERM/.test(l)));
  // Killing a starting client makes vscode-languageclient show its own "couldn't create
  // connection" message, which cannot be turned off; the extension adds nothing of its own.
  const ours = c.events('error').filter((m) => !/client: couldn't create connection to server/.test(m));
  assert.deepEqual(ours, [], 'a superseded start reports nothing');
}

async function pythonInterpreter(c) {
  // `dgLsp.server.python` runs `<python> -m dg_lsp serve` in the workspace folder; a fake dg_lsp
  // package there stands in for the real one.
  const pkg = path.join(c.tmp, 'dg_lsp');
  fs.mkdirSync(pkg);
  fs.writeFileSync(path.join(pkg, '__init__.py'), '');
  fs.writeFileSync(path.join(pkg, '__main__.py'),
    `import runpy\nrunpy.run_path(${JSON.stringify(FAKE_SERVER)}, run_name="__main__")\n`);
  c.vscode.workspace.workspaceFolders = [{ uri: c.vscode.Uri.file(c.tmp), name: 'ws', index: 0 }];
  c.t.setSetting('dgLsp.server.python', 'python3');
  c.activate();
  await c.waitFor('ready status', () => c.status() === '$(check) DG 42 ms');
  assert.ok(c.events('log').some((l) => /^info: Starting \S*python3 -m dg_lsp serve$/.test(l)), 'started with -m dg_lsp serve');
  assert.ok(c.events('log').includes("info: INFO fake dg-lsp starting, args=['serve']"), 'stderr forwarded at its own level');
}
