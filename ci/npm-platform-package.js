// Writes the package.json and README.md of one npm platform package of
// krabka-coordination (napi-rs's layout): the prebuilt addon alone, which npm
// installs only on a machine whose os, cpu and libc match. ci/release.sh and
// ci/release-cross.sh use it, one call per platform.
//
// Usage: node ci/npm-platform-package.js VERSION PLATFORM SOURCE_PACKAGE_JSON DIR
//   PLATFORM: one of the keys of PLATFORMS below (linux-x64-gnu, ...).
'use strict'
const fs = require('node:fs')
const path = require('node:path')

// Each platform package: npm's os, cpu and libc values, and how the
// description names the machine. The Linux ones are released (ci/release.sh,
// ci/release-cross.sh; the main package names them); macOS and Windows are
// planned, built only by .github/workflows/release.yml, which this
// repository's CI does not run.
const PLATFORMS = {
  'linux-x64-gnu': { os: 'linux', cpu: 'x64', libc: 'glibc', machine: 'Linux x86-64, glibc' },
  'linux-arm64-gnu': { os: 'linux', cpu: 'arm64', libc: 'glibc', machine: 'Linux arm64, glibc' },
  'linux-x64-musl': { os: 'linux', cpu: 'x64', libc: 'musl', machine: 'Linux x86-64, musl' },
  'linux-arm64-musl': { os: 'linux', cpu: 'arm64', libc: 'musl', machine: 'Linux arm64, musl' },
  'darwin-arm64': { os: 'darwin', cpu: 'arm64', machine: 'macOS arm64; planned' },
  'darwin-x64': { os: 'darwin', cpu: 'x64', machine: 'macOS x86-64; planned' },
  'win32-x64': { os: 'win32', cpu: 'x64', machine: 'Windows x86-64; planned' },
}
// The platform packages the main package names.
const RELEASED = Object.keys(PLATFORMS).filter((p) => PLATFORMS[p].os === 'linux')
module.exports = { PLATFORMS, RELEASED }

if (require.main === module) {
  const [version, platform, source, dir] = process.argv.slice(2)
  const p = PLATFORMS[platform]
  if (!dir) throw new Error('usage: node ci/npm-platform-package.js VERSION PLATFORM SOURCE_PACKAGE_JSON DIR')
  if (!p) throw new Error(`unknown platform ${platform} (known: ${Object.keys(PLATFORMS).join(', ')})`)
  const pkg = JSON.parse(fs.readFileSync(source, 'utf8'))
  if (pkg.version !== version) throw new Error(`${source} is ${pkg.version}, not ${version}`)
  const addon = `krabka-coordination.${platform}.node`
  if (!fs.existsSync(path.join(dir, addon))) throw new Error(`${dir} holds no ${addon}`)
  const plat = {
    name: `${pkg.name}-${platform}`,
    version,
    description: `The prebuilt native addon of ${pkg.name} for ${platform} (${p.machine})`,
    license: pkg.license,
    os: [p.os],
    cpu: [p.cpu],
    ...(p.libc ? { libc: [p.libc] } : {}),
    main: addon,
    files: [addon],
    engines: pkg.engines,
  }
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify(plat, null, 2) + '\n')
  fs.writeFileSync(
    path.join(dir, 'README.md'),
    `# ${plat.name}\n\nThe prebuilt addon of [${pkg.name}](https://www.npmjs.com/package/${pkg.name}) ` +
      `for ${platform}. Install \`${pkg.name}\`; npm picks this package on a matching machine.\n`,
  )
}
