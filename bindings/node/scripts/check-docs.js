'use strict'
// Checks that index.d.ts documents every public name: each exported
// declaration, and each member of an exported class or interface, must follow
// a `/** ... */` doc comment (the comment ends on the line just above it).
// The only exception is napi's alias of a native class under its old name
// (`export type NativeClient = _Client`), documented by the class itself.
// Usage: node scripts/check-docs.js [index.d.ts]; exits 1 listing what lacks one.

const fs = require('node:fs')
const path = require('node:path')

const file = process.argv[2] ?? path.join(__dirname, '..', 'index.d.ts')
const lines = fs.readFileSync(file, 'utf8').split('\n')
const missing = []
let checked = 0
let depth = 0 // brace depth: 1 inside an exported class or interface body
let inBody = false

const documented = (i) => {
  let j = i - 1
  while (j >= 0 && lines[j].trim().startsWith('@')) j-- // decorators, none today
  return j >= 0 && lines[j].trim().endsWith('*/') && !lines[j].trim().startsWith('//')
}

for (let i = 0; i < lines.length; i++) {
  const line = lines[i]
  const t = line.trim()
  if (depth === 0) {
    if (/^export\s/.test(t)) {
      const alias = /^export type \w+ = \w+$/.test(t)
      if (!alias) {
        checked++
        if (!documented(i)) missing.push(`${i + 1}: ${t}`)
      }
      inBody = /^export (declare )?(class|interface)\s/.test(t)
    }
  } else if (depth === 1 && inBody && t && !t.startsWith('/**') && !t.startsWith('*') && !t.startsWith('//') && t !== '}') {
    checked++
    if (!documented(i)) missing.push(`${i + 1}: ${t}`)
  }
  // Braces of the code, not of comments or strings (none carry braces in declarations).
  if (!t.startsWith('*') && !t.startsWith('/**') && !t.startsWith('//')) {
    for (const ch of line.replace(/'[^']*'/g, '')) {
      if (ch === '{') depth++
      else if (ch === '}') depth--
    }
    if (depth === 0) inBody = false
  }
}

if (checked === 0) {
  console.error(`${file}: no exported declaration found`)
  process.exit(1)
}
if (missing.length > 0) {
  console.error(`${file}: ${missing.length} of ${checked} public declarations have no doc comment:\n  ${missing.join('\n  ')}`)
  process.exit(1)
}
console.log(`${path.basename(file)}: all ${checked} public declarations carry a doc comment`)
