'use strict'
// krabka-coordination for Node.js: leader election, leases and fencing
// tokens on Apache Kafka, the Rust core through napi-rs. This file loads the
// addon and exports the public names; index.d.ts documents each.
//
// Where the addon comes from, in this order:
//   1. krabka-coordination.node next to this file: built from source by
//      `npm install` of the repository's folder (`npm run build`);
//   2. the prebuilt addon of the platform's package, napi-rs's layout: the
//      released package lists krabka-coordination-<platform> packages as
//      optionalDependencies, npm installs the one matching the machine
//      (its package.json names os, cpu and libc), and it holds
//      krabka-coordination.<platform>.node.

const fs = require('node:fs')
const path = require('node:path')

// The platform triple of napi-rs's package names: linux-x64-gnu, ...
function platformTriple() {
  const { platform, arch } = process
  if (platform !== 'linux') return `${platform}-${arch}`
  // glibc or musl: Node's report names the glibc it runs on, musl has none.
  const glibc = process.report?.getReport?.()?.header?.glibcVersionRuntime
  return `${platform}-${arch}-${glibc ? 'gnu' : 'musl'}`
}

function load() {
  const tried = []
  const local = path.join(__dirname, 'krabka-coordination.node')
  if (fs.existsSync(local)) {
    try {
      return require(local)
    } catch (e) {
      tried.push(`${local}: ${e.message}`)
    }
  } else {
    tried.push(`${local}: not built`)
  }
  const triple = platformTriple()
  const pkg = `krabka-coordination-${triple}`
  try {
    return require(`${pkg}/krabka-coordination.${triple}.node`)
  } catch (e) {
    tried.push(`${pkg}: ${e.code === 'MODULE_NOT_FOUND' ? 'not installed' : e.message}`)
  }
  throw new Error(
    `krabka-coordination: no native addon for ${triple}. Tried:\n  ${tried.join('\n  ')}\n` +
      'The released package installs a prebuilt addon on Linux x86-64 and arm64, glibc 2.17+ or musl (its ' +
      `optional dependencies krabka-coordination-linux-{x64,arm64}-{gnu,musl}); npm skips it when optional ` +
      `dependencies are omitted. Elsewhere build it from source: \`npm run build\` in ${__dirname} ` +
      '(a Rust toolchain, a C compiler, cmake, libssl-dev and pkg-config).',
  )
}

const native = load()
const errors = require('./lib/errors')
native._registerErrorFactory(errors.makeError)
errors.registerKinds(native.errorKinds())
require('./lib/options').registerKeyCheck(native._checkOptionKeys)
// The core's metrics count from here on (src/metrics.rs).
native._installMetrics()
const values = require('./lib/values').makeValues(native)
const { Leadership, LeadershipEvents } = require('./lib/leadership')
const { Observer } = require('./lib/observer')
const Client = require('./lib/client').makeClient(native)
const { logger, setLogLevel, getLogLevel } = require('./lib/logger').makeLogger(native)
const { registerMetrics } = require('./lib/prometheus').makePrometheus(native)

// `console.log(status)` and `console.log(report)`: their fields (the
// native classes' getters live on the prototype, which inspect skips).
const inspect = Symbol.for('nodejs.util.inspect.custom')
const inspectFields = (cls, fields) => {
  Object.defineProperty(cls.prototype, inspect, {
    value(depth, options, inspectFn) {
      const shown = {}
      for (const f of fields) shown[f] = this[f]
      return `${cls.name} ${inspectFn(shown, { ...options, depth: options.depth === null ? null : options.depth - 1 })}`
    },
  })
}
inspectFields(native.LeadershipStatus, ['token'])
inspectFields(native.RoleStateReport, ['role', 'partition', 'roster', 'lease'])

module.exports = {
  // The conformance surface.
  Key: values.Key,
  Registration: values.Registration,
  Lease: values.Lease,
  FencingToken: values.FencingToken,
  NO_EPOCH: values.NO_EPOCH,
  toDate: values.toDate,
  encodeKey: values.encodeKey,
  decodeKey: native.decodeKey,
  encodeRegistration: values.encodeRegistration,
  decodeRegistration: values.decodeRegistration,
  encodeLease: values.encodeLease,
  decodeLease: values.decodeLease,
  decodeLeases: values.decodeLeases,
  rolePartition: native.rolePartition,
  murmur2: native.murmur2,
  // Leadership.
  Client,
  Leadership,
  LeadershipEvents,
  Observer,
  LeadershipStatus: native.LeadershipStatus,
  RoleStateReport: native.RoleStateReport,
  // Logs.
  logger,
  setLogLevel,
  getLogLevel,
  // Metrics.
  metrics: native.metrics,
  metricsText: native.metricsText,
  registerMetrics,
  // Errors.
  errorKinds: native.errorKinds,
  KrabkaError: errors.KrabkaError,
  FormatError: errors.FormatError,
  EncodeError: errors.EncodeError,
  InvalidArgumentError: errors.InvalidArgumentError,
  FencedError: errors.FencedError,
  TransientError: errors.TransientError,
  FatalError: errors.FatalError,
  ResignedError: errors.ResignedError,
  CancelledError: errors.CancelledError,
  LeaseExpiredError: errors.LeaseExpiredError,
  OutcomeUnknownError: errors.OutcomeUnknownError,
  // Internal: the native handles behind Client, Leadership and Observer, and test hooks.
  _Client: native._Client,
  _Leadership: native._Leadership,
  _EventStream: native._EventStream,
  _AcquireEvents: native._AcquireEvents,
  _Observer: native._Observer,
  _CancelToken: native._CancelToken,
  _TestCluster: native._TestCluster,
  _throwCoreError: native._throwCoreError,
  // Internal: the fence of SQL stores behind krabka-coordination/stores.
  _fenceSql: native._fenceSql,
  _fenceCheck: native._fenceCheck,
  _fenceVerdict: native._fenceVerdict,
  _fenceProven: native._fenceProven,
  _fenceError: native._fenceError,
  _logFromCore: native._logFromCore,
}
