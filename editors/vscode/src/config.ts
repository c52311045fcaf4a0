// Reading the `dgLsp` settings section and turning it into what the server and the client need.
//
// The server's own configuration is the subset of `dgLsp.*` that is not about how the extension
// launches it (`server.*`) or how the client logs (`trace.*`). The same object goes out as
// `initializationOptions` and, later, inside `workspace/didChangeConfiguration`, so the server
// only has to understand one shape.
import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';

export const SECTION = 'dgLsp';

export const DEFAULT_LANGUAGES: readonly string[] = [
  'python',
  'javascript',
  'typescript',
  'javascriptreact',
  'typescriptreact',
  'rust',
  'go',
  'c',
  'cpp',
  'java',
  'markdown',
];

export type Device = 'auto' | 'cpu' | 'cuda';
export type Dtype = 'auto' | 'float32' | 'bfloat16' | 'float16';
export type Quantization = 'auto' | 'none' | 'int8' | 'fp8' | 'nf4';
export type ConfidenceDisplay = 'inlayHints' | 'diagnostics' | 'both' | 'off';

/** What the server receives. Nested keys mirror the dotted setting names (`inline.enabled`). */
export interface ServerSettings {
  model: string;
  device: Device;
  dtype: Dtype;
  quantization: Quantization;
  canvasLength: number;
  maxSteps: number;
  entropyBound: number;
  leadBeam: number;
  candidates: number;
  contextBudget: number;
  crossFileContext: boolean;
  languages: string[];
  holeMarkers: string[];
  inline: { enabled: boolean; validOnly: boolean; repairBudgetMs: number };
  drafts: boolean;
  confidence: { threshold: number; display: ConfidenceDisplay };
  syntaxRepair: boolean;
  repairRounds: number;
  variableLength: boolean;
  jointHoles: boolean;
  nextEdit: { enabled: boolean; minConfidence: number; onlyImplied: boolean; debounceMs: number };
  adapter: string;
}

/** How to start the server process. */
export interface LaunchSettings {
  /** Interpreter path when `dgLsp.server.python` is set, otherwise undefined. */
  python: string | undefined;
  command: string;
  args: string[];
}

function cfg(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration(SECTION);
}

// Settings can be edited by hand in settings.json, so every value is checked and clamped here
// instead of trusting the schema; the server then never sees a type it does not expect.
function pickEnum<T extends string>(value: unknown, allowed: readonly T[], fallback: T): T {
  return typeof value === 'string' && (allowed as readonly string[]).includes(value)
    ? (value as T)
    : fallback;
}

function int(value: unknown, fallback: number, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    return fallback;
  }
  return Math.min(max, Math.max(min, Math.trunc(value)));
}

function num(value: unknown, fallback: number, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    return fallback;
  }
  return Math.min(max, Math.max(min, value));
}

function bool(value: unknown, fallback: boolean): boolean {
  return typeof value === 'boolean' ? value : fallback;
}

function strings(value: unknown, fallback: readonly string[]): string[] {
  if (!Array.isArray(value)) {
    return [...fallback];
  }
  return value.filter((v): v is string => typeof v === 'string' && v.trim() !== '');
}

export function languages(): string[] {
  const list = strings(cfg().get('languages'), DEFAULT_LANGUAGES);
  // Deduplicate so the document selector and the `when`-clause context stay small.
  return [...new Set(list)];
}

export function draftsEnabled(): boolean {
  return bool(cfg().get('drafts'), false);
}

export function serverSettings(): ServerSettings {
  const c = cfg();
  const model = c.get<unknown>('model');
  return {
    model: typeof model === 'string' && model.trim() !== '' ? model : 'embedded',
    device: pickEnum(c.get('device'), ['auto', 'cpu', 'cuda'] as const, 'auto'),
    dtype: pickEnum(c.get('dtype'), ['auto', 'float32', 'bfloat16', 'float16'] as const, 'auto'),
    quantization: pickEnum(c.get('quantization'), ['auto', 'none', 'int8', 'fp8', 'nf4'] as const, 'auto'),
    canvasLength: int(c.get('canvasLength'), 0, 0, 1 << 20),
    maxSteps: int(c.get('maxSteps'), 0, 0, 1 << 20),
    entropyBound: num(c.get('entropyBound'), 0, 0, Number.MAX_VALUE),
    leadBeam: int(c.get('leadBeam'), 0, 0, 16),
    candidates: int(c.get('candidates'), 1, 1, 8),
    contextBudget: int(c.get('contextBudget'), 2048, 0, 1 << 24),
    crossFileContext: bool(c.get('crossFileContext'), true),
    languages: languages(),
    holeMarkers: strings(c.get('holeMarkers'), ['TODO(dg)']),
    inline: {
      enabled: bool(c.get('inline.enabled'), true),
      validOnly: bool(c.get('inline.validOnly'), false),
      repairBudgetMs: int(c.get('inline.repairBudgetMs'), 250, 0, 60000),
    },
    drafts: draftsEnabled(),
    confidence: {
      threshold: num(c.get('confidence.threshold'), 0.3, 0, 1),
      display: pickEnum(
        c.get('confidence.display'),
        ['inlayHints', 'diagnostics', 'both', 'off'] as const,
        'diagnostics',
      ),
    },
    syntaxRepair: bool(c.get('syntaxRepair'), true),
    repairRounds: int(c.get('repairRounds'), 2, 0, 8),
    variableLength: bool(c.get('variableLength'), true),
    jointHoles: bool(c.get('jointHoles'), true),
    nextEdit: { enabled: nextEditEnabled(), minConfidence: num(c.get('nextEdit.minConfidence'), 0.5, 0, 1), onlyImplied: bool(c.get('nextEdit.onlyImplied'), true), debounceMs: nextEditDebounceMs() },
    adapter: adapterSetting(c.get('adapter')),
  };
}

/** `off`, `workspace` or a directory; anything else is `off`. */
function adapterSetting(value: unknown): string {
  return typeof value === 'string' && value.trim() !== '' ? expandHome(value.trim()) : 'off';
}

/** How long "Learn this repository" trains. */
export function learningMinutes(): number {
  return num(cfg().get('learning.minutes'), 20, 0.1, 1440);
}

export function nextEditEnabled(): boolean {
  return bool(cfg().get('nextEdit.enabled'), true);
}

/** The pause after an edit before the next edit is asked for. */
export function nextEditDebounceMs(): number {
  return int(cfg().get('nextEdit.debounceMs'), 300, 1, 10_000);
}

/** Expands a leading `~` so users can write `~/venvs/dg/bin/dg-lsp` as they would in a shell. */
export function expandHome(p: string): string {
  if (p === '~') {
    return os.homedir();
  }
  if (p.startsWith('~/') || p.startsWith('~\\')) {
    return path.join(os.homedir(), p.slice(2));
  }
  return p;
}

export function launchSettings(): LaunchSettings {
  const c = cfg();
  const python = c.get<unknown>('server.python');
  const command = c.get<unknown>('server.command');
  const args = c.get<unknown>('server.args');
  return {
    python: typeof python === 'string' && python.trim() !== '' ? expandHome(python.trim()) : undefined,
    command:
      typeof command === 'string' && command.trim() !== '' ? expandHome(command.trim()) : 'dg-lsp',
    args: Array.isArray(args) ? args.filter((a): a is string => typeof a === 'string') : ['serve'],
  };
}

/**
 * Settings that are fixed when the client is created (the process to spawn, the document
 * selector); changing them needs a restart, while everything else reaches the running server
 * through didChangeConfiguration.
 */
export function needsRestart(event: vscode.ConfigurationChangeEvent): boolean {
  return (
    event.affectsConfiguration(`${SECTION}.server`) ||
    event.affectsConfiguration(`${SECTION}.languages`)
  );
}

/** Extension id as `publisher.name`, used to filter the Settings editor to this extension. */
export const EXTENSION_ID = 'dg-lsp.dg-lsp';

/** Opens the Settings editor on this extension's settings, optionally narrowed by `query`. */
export function openSettings(query = ''): Thenable<unknown> {
  const filter = `@ext:${EXTENSION_ID}${query ? ` ${query}` : ''}`;
  return vscode.commands.executeCommand('workbench.action.openSettings', filter);
}
