// Bundles src/extension.ts and vscode-languageclient into one CommonJS file, so the .vsix
// can ship without node_modules (vsce package --no-dependencies).
import * as esbuild from 'esbuild';

const production = process.argv.includes('--production');
const watch = process.argv.includes('--watch');

const options = {
  entryPoints: ['src/extension.ts'],
  outfile: 'dist/extension.js',
  bundle: true,
  // The extension host is Node and loads extensions with require(); 'vscode' is provided by it.
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  external: ['vscode'],
  minify: production,
  sourcemap: true,
  // Keep sources out of the map: the map is for stack traces, and the .vsix stays small.
  sourcesContent: false,
  logLevel: 'info',
};

if (watch) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
} else {
  await esbuild.build(options);
}
