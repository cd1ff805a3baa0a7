'use strict'
// The package's install step (and `npm run build`): builds the addon from
// source with the napi-rs CLI (`napi build --release`), which also writes
// index.d.ts. The CLI is the package's own devDependency when it is
// installed (npm install inside bindings/node); a folder installed by
// `npm install ./bindings/node` is linked and gets no dependencies of its
// own, so the same pinned CLI then runs through npx from the npm registry.
// `--debug` (or KRABKA_NODE_BUILD=debug) builds without optimisations.

const { spawnSync } = require('node:child_process')
const path = require('node:path')

const pkgDir = path.resolve(__dirname, '..')
const pkg = require(path.join(pkgDir, 'package.json'))
const version = pkg.devDependencies['@napi-rs/cli']
const args = ['build', '--dts', 'index.d.ts']
// KRABKA_NODE_BUILD=debug does the same (ci/node.sh sets it: the workspace's
// tests have compiled the core and librdkafka without optimisations by then).
const debug = process.argv.includes('--debug') || process.env.KRABKA_NODE_BUILD === 'debug'
if (!debug) args.splice(1, 0, '--release')

let command
let commandArgs
try {
  const cliPkg = require.resolve('@napi-rs/cli/package.json', { paths: [pkgDir] })
  const bin = require(cliPkg).bin
  command = process.execPath
  commandArgs = [path.join(path.dirname(cliPkg), typeof bin === 'string' ? bin : bin.napi), ...args]
} catch {
  command = process.platform === 'win32' ? 'npx.cmd' : 'npx'
  commandArgs = ['--yes', '--package', `@napi-rs/cli@${version}`, 'napi', ...args]
}
console.error(`krabka-coordination: building the addon: ${path.basename(command)} ${commandArgs.join(' ')}`)
const done = spawnSync(command, commandArgs, { cwd: pkgDir, stdio: 'inherit' })
if (done.error) {
  console.error(`krabka-coordination: cannot run the napi-rs CLI: ${done.error.message}`)
  process.exit(1)
}
if (done.status === 0) publicOnly(path.join(pkgDir, 'index.d.ts'))
process.exit(done.status ?? 1)

// Drops the internal native names from the generated index.d.ts: a class,
// function or type alias whose name (or aliased name) starts with `_` is
// the package's own plumbing (index.js wraps it), not its API. Each goes
// with the doc comment right above it.
function publicOnly(file) {
  const fs = require('node:fs')
  const lines = fs.readFileSync(file, 'utf8').split('\n')
  const out = []
  const internal = /^export (declare (class|function|const) _|type \w+ = _)/
  for (let i = 0; i < lines.length; i++) {
    if (!internal.test(lines[i])) {
      out.push(lines[i])
      continue
    }
    // The doc comment above it, already copied: take it back.
    if (out.length > 0 && out[out.length - 1].trim().endsWith('*/')) {
      while (out.length > 0 && !out[out.length - 1].trimStart().startsWith('/**')) out.pop()
      out.pop()
    }
    // A class runs to its closing brace at the start of a line.
    if (/^export declare class /.test(lines[i]) && !lines[i].trimEnd().endsWith('}')) {
      while (i + 1 < lines.length && lines[i + 1] !== '}') i++
      i++
    }
  }
  fs.writeFileSync(file, out.join('\n').replace(/\n{3,}/g, '\n\n'))
}
