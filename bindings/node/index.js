'use strict'
// krabka-coordination for Node.js: leader election, leases and fencing
// tokens on Apache Kafka, the Rust core through napi-rs. This file loads the
// addon (built by `npm install`, see README.md) and exports the public names;
// index.d.ts documents each.

const path = require('node:path')

function load() {
  const file = path.join(__dirname, 'krabka-coordination.node')
  try {
    return require(file)
  } catch (e) {
    throw new Error(
      `krabka-coordination: cannot load the native addon ${file} (${e.message}). ` +
        `It is built from source by \`npm install\` in ${__dirname} (\`npm run build\` rebuilds it; ` +
        'it needs a Rust toolchain, a C compiler, cmake, libssl-dev and pkg-config).',
      { cause: e },
    )
  }
}

const native = load()
const errors = require('./lib/errors')
native._registerErrorFactory(errors.makeError)
const values = require('./lib/values').makeValues(native)
const { Leadership, LeadershipEvents } = require('./lib/leadership')
const Client = require('./lib/client').makeClient(native)

module.exports = {
  // The conformance surface.
  Key: values.Key,
  Registration: values.Registration,
  Lease: values.Lease,
  FencingToken: values.FencingToken,
  NO_EPOCH: values.NO_EPOCH,
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
  LeadershipStatus: native.LeadershipStatus,
  RoleStateReport: native.RoleStateReport,
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
  // Internal: the native handles behind Client and Leadership, and test hooks.
  _Client: native._Client,
  _Leadership: native._Leadership,
  _EventStream: native._EventStream,
  _CancelToken: native._CancelToken,
  _throwCoreError: native._throwCoreError,
}
