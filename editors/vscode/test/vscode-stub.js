// A minimal stand-in for the `vscode` module, so the bundled extension (dist/extension.js) can be
// loaded by plain Node in test/smoke.js. The parts the extension and vscode-languageclient really
// depend on are implemented; any other property is an inert placeholder (see `inert`) that can be
// called, constructed or extended without doing anything.
'use strict';
const path = require('node:path');

/** Everything observable the extension did, in order: messages, progress, decorations, … */
const events = [];
const record = (kind, data) => {
  events.push({ kind, data });
  if (process.env.SMOKE_VERBOSE) {
    console.log('[vscode]', kind, typeof data === 'string' ? data : JSON.stringify(data));
  }
};

function inert(name) {
  const target = function () {};
  return new Proxy(target, {
    get(t, p) {
      if (p === 'then') return undefined; // not a thenable, or `await` would hang
      if (p === 'dispose') return () => {};
      if (p === Symbol.toPrimitive) return () => name;
      if (!(p in t)) t[p] = inert(`${name}.${String(p)}`);
      return t[p];
    },
    apply: () => inert(`${name}()`),
    construct: (_t, args, newTarget) => Reflect.construct(function () {}, args, newTarget),
  });
}

class Disposable {
  constructor(fn) { this.fn = fn; }
  dispose() { if (this.fn) this.fn(); this.fn = undefined; }
  static from(...items) { return new Disposable(() => items.forEach((d) => d && d.dispose && d.dispose())); }
}

class EventEmitter {
  constructor() {
    this.listeners = [];
    // As in VS Code, `event(listener, thisArgs)` calls the listener with `thisArgs` as `this`.
    this.event = (fn, thisArgs) => {
      const bound = thisArgs === undefined ? fn : fn.bind(thisArgs);
      this.listeners.push(bound);
      return new Disposable(() => { this.listeners = this.listeners.filter((l) => l !== bound); });
    };
  }
  fire(e) { for (const l of this.listeners.slice()) l(e); }
  dispose() { this.listeners = []; }
}

class CancellationTokenSource {
  constructor() {
    this.emitter = new EventEmitter();
    this.token = { isCancellationRequested: false, onCancellationRequested: this.emitter.event };
  }
  cancel() {
    if (!this.token.isCancellationRequested) {
      this.token.isCancellationRequested = true;
      this.emitter.fire();
    }
  }
  dispose() {}
}

class Position {
  constructor(line, character) { this.line = line; this.character = character; }
  isEqual(o) { return o.line === this.line && o.character === this.character; }
}

class Range {
  constructor(a, b, c, d) {
    if (typeof a === 'number') { a = new Position(a, b); b = new Position(c, d); }
    this.start = a;
    this.end = b;
  }
  get isEmpty() { return this.start.isEqual(this.end); }
}

class Selection extends Range {
  constructor(anchor, active) { super(anchor, active); this.anchor = anchor; this.active = active; }
}

class Uri {
  constructor(scheme, p) { this.scheme = scheme; this.path = p; this.authority = ''; this.query = ''; this.fragment = ''; }
  get fsPath() { return this.path; }
  toString() { return this.scheme === 'file' ? `file://${this.path}` : `${this.scheme}:${this.path}`; }
  toJSON() { return this.toString(); }
  with() { return this; }
  static file(p) { return new Uri('file', path.resolve(p)); }
  static parse(s) {
    if (s.startsWith('file://')) return new Uri('file', decodeURIComponent(s.slice('file://'.length)));
    const i = s.indexOf(':');
    return new Uri(s.slice(0, i), s.slice(i + 1));
  }
}

class ThemeColor { constructor(id) { this.id = id; } }

const rangeText = (r) => `${r.start.line}:${r.start.character}-${r.end.line}:${r.end.character}`;

/** Records what an edit would do: `[uri, "line:col-line:col", newText]` per replacement. */
class WorkspaceEdit {
  constructor() { this.entries = []; }
  replace(uri, range, newText) { this.entries.push([uri.toString(), rangeText(range), newText]); }
  insert(uri, position, newText) { this.replace(uri, new Range(position, position), newText); }
  delete(uri, range) { this.replace(uri, range, ''); }
  set(uri, edits) { this.entries.push([uri.toString(), 'set', edits.length]); }
  createFile() {}
  renameFile() {}
  deleteFile() {}
}

// ----- configuration: defaults from package.json, overridden by setSetting() ---------------------
const manifest = require(path.join(__dirname, '..', 'package.json'));
const defaults = {};
for (const [key, schema] of Object.entries(manifest.contributes.configuration.properties)) {
  defaults[key] = schema.default;
}
const userSettings = {};
const documentChanges = new EventEmitter();
const configEmitter = new EventEmitter();

function readSetting(full) {
  if (full in userSettings) return userSettings[full];
  if (full in defaults) return defaults[full];
  // A section such as `dgLsp` or `dgLsp.inline`: build the nested object like VS Code does.
  let found = false;
  const obj = {};
  for (const key of new Set([...Object.keys(defaults), ...Object.keys(userSettings)])) {
    if (!key.startsWith(`${full}.`)) continue;
    found = true;
    const parts = key.slice(full.length + 1).split('.');
    let node = obj;
    for (const part of parts.slice(0, -1)) node = node[part] = node[part] || {};
    node[parts[parts.length - 1]] = readSetting(key);
  }
  return found ? obj : undefined;
}

function getConfiguration(section) {
  const prefix = section ? `${section}.` : '';
  return {
    get: (key, fallback) => { const v = readSetting(prefix + key); return v === undefined ? fallback : v; },
    has: (key) => readSetting(prefix + key) !== undefined,
    inspect: () => undefined,
    update: async () => {},
  };
}

function setSetting(key, value) {
  userSettings[key] = value;
  configEmitter.fire({
    affectsConfiguration: (s) => key === s || key.startsWith(`${s}.`) || s.startsWith(`${key}.`),
  });
}

// ----- documents and editors -----------------------------------------------------------------------
function makeDocument(file, languageId, text) {
  return {
    uri: Uri.file(file), fileName: file, languageId, version: 1,
    /** Test only: the user replaces the whole text; fires onDidChangeTextDocument. */
    type(newText) {
      const end = this.positionAt(text.length);
      text = newText;
      this.version += 1;
      documentChanges.fire({ document: this, contentChanges: [{ range: new Range(new Position(0, 0), end), text: newText }], reason: undefined });
    },
    isClosed: false, isDirty: false, isUntitled: false, eol: 1,
    getText(range) { return range ? text.slice(this.offsetAt(range.start), this.offsetAt(range.end)) : text; },
    get lineCount() { return text.split('\n').length; },
    offsetAt(p) {
      const lines = text.split('\n');
      let offset = 0;
      for (let i = 0; i < p.line; i++) offset += lines[i].length + 1;
      return offset + p.character;
    },
    positionAt(offset) {
      const before = text.slice(0, offset).split('\n');
      return new Position(before.length - 1, before[before.length - 1].length);
    },
    lineAt(line) { const t = text.split('\n')[line]; return { text: t, range: new Range(line, 0, line, t.length) }; },
    save: async () => true,
  };
}

function makeEditor(document, selection) {
  return {
    document,
    selection,
    setDecorations(type, options) {
      // After-text decorations record their text; others (strike-through) their ranges.
      record('decorations', options.map((o) => (o.renderOptions ? o.renderOptions.after.contentText
        : `${type.options.textDecoration || 'range'} ${rangeText(o.range)}`)));
    },
  };
}

const registry = new Map();
const statusItems = [];
const answers = { inputBox: undefined };
let lastProgress;

const window = {
  visibleTextEditors: [],
  activeTextEditor: undefined,
  createOutputChannel(name) {
    const write = (level) => (message) => record('log', `${level}: ${message}`);
    return {
      name, logLevel: 2, onDidChangeLogLevel: new EventEmitter().event,
      trace: write('trace'), debug: write('debug'), info: write('info'), warn: write('warn'), error: write('error'),
      append: write('append'), appendLine: write('line'), replace() {}, clear() {},
      show() { record('showLog', name); }, hide() {}, dispose() {},
    };
  },
  createStatusBarItem(id) {
    const item = { id, text: '', tooltip: '', show() {}, hide() {}, dispose() {} };
    statusItems.push(item);
    return item;
  },
  createTextEditorDecorationType: (options) => ({ options, dispose() {} }),
  showErrorMessage: async (message) => { record('error', message); return undefined; },
  showWarningMessage: async (message) => { record('warning', message); return undefined; },
  showInformationMessage: async (message) => { record('info', message); return undefined; },
  setStatusBarMessage: (message) => { record('statusMessage', message); return new Disposable(); },
  showQuickPick: async (items) => {
    record('quickPick', (await items).map((i) => (i.description ? `${i.label} = ${i.description}` : i.label)));
    return undefined;
  },
  showInputBox: async () => answers.inputBox,
  withProgress: async (options, task) => {
    lastProgress = new CancellationTokenSource();
    record('progress', options.title);
    return task({ report() {} }, lastProgress.token);
  },
  onDidChangeTextEditorSelection: new EventEmitter().event,
  onDidChangeVisibleTextEditors: new EventEmitter().event,
  onDidChangeActiveTextEditor: new EventEmitter().event,
  onDidChangeWindowState: new EventEmitter().event,
  tabGroups: { all: [], onDidChangeTabs: new EventEmitter().event, onDidChangeTabGroups: new EventEmitter().event },
  state: { focused: true },
};

const workspace = {
  workspaceFolders: undefined,
  textDocuments: [],
  notebookDocuments: [],
  getConfiguration,
  getWorkspaceFolder: () => undefined,
  applyEdit: async (edit) => { record('applyEdit', edit); return true; },
  onDidChangeConfiguration: configEmitter.event,
  onDidOpenTextDocument: new EventEmitter().event,
  onDidChangeTextDocument: documentChanges.event,
  onDidCloseTextDocument: new EventEmitter().event,
  onDidSaveTextDocument: new EventEmitter().event,
  onWillSaveTextDocument: new EventEmitter().event,
  onDidChangeWorkspaceFolders: new EventEmitter().event,
  onDidOpenNotebookDocument: new EventEmitter().event,
  onDidCloseNotebookDocument: new EventEmitter().event,
  onDidChangeNotebookDocument: new EventEmitter().event,
  onDidSaveNotebookDocument: new EventEmitter().event,
};

const languages = new Proxy({
  match(selector, document) {
    const filters = Array.isArray(selector) ? selector : [selector];
    const hit = filters.some((f) => (typeof f === 'string'
      ? f === document.languageId
      : (!f.language || f.language === document.languageId) && (!f.scheme || f.scheme === document.uri.scheme)));
    return hit ? 10 : 0;
  },
  registerInlineCompletionItemProvider(selector) {
    record('registerInlineCompletion', selector.length);
    return new Disposable();
  },
}, {
  // Every other registerXxxProvider just hands back a disposable.
  get: (t, p) => (p in t ? t[p] : () => new Disposable()),
});

const commands = {
  registerCommand(id, fn) { registry.set(id, fn); return new Disposable(() => registry.delete(id)); },
  executeCommand: async (id, ...args) => {
    if (registry.has(id)) return registry.get(id)(...args);
    record('builtinCommand', [id, ...args]);
    return undefined;
  },
  getCommands: async () => [...registry.keys()],
};

const api = {
  Disposable, EventEmitter, CancellationTokenSource, Position, Range, Selection, Uri, ThemeColor, WorkspaceEdit,
  CancellationError: class CancellationError extends Error {},
  window, workspace, languages, commands,
  env: {
    clipboard: { writeText: async (text) => record('clipboard', text) },
    machineId: 'smoke', sessionId: 'smoke', language: 'en', appName: 'smoke', uriScheme: 'vscode',
    openExternal: async () => true,
  },
  extensions: { getExtension: () => undefined, all: [], onDidChange: new EventEmitter().event },
  version: '1.95.0',
  StatusBarAlignment: { Left: 1, Right: 2 },
  ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
  DecorationRangeBehavior: { OpenOpen: 0, ClosedClosed: 1, OpenClosed: 2, ClosedOpen: 3 },
  QuickPickItemKind: { Separator: -1, Default: 0 },
  LogLevel: { Off: 0, Trace: 1, Debug: 2, Info: 3, Warning: 4, Error: 5 },
  TextEditorSelectionChangeKind: { Keyboard: 1, Mouse: 2, Command: 3 },
};

/** Test-only handles; not part of the real API. */
const testing = {
  events, statusItems, answers, setSetting, makeDocument, makeEditor,
  cancelLastProgress: () => lastProgress && lastProgress.cancel(),
};

module.exports = new Proxy(Object.assign(api, { __testing: testing }), {
  get: (t, p) => (p in t ? t[p] : (t[p] = inert(String(p)))),
});
