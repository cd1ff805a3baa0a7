'use strict'
// The options objects of the package's calls: an object or undefined, with
// only the call's own keys. An unknown key (`{ lease: 5 }` for
// `leaseDuration`) is an InvalidArgumentError naming it and the nearest
// known name (the shared crate's rule, through the addon), never a default
// run in silence.

const { argTypeError } = require('./errors')

let checkKeys = () => {}

/** Registers the addon's key check (`_checkOptionKeys`). */
function registerKeyCheck(fn) {
  checkKeys = fn
}

/** Checks `options` of `call`: undefined, or a plain object whose keys are
 * all in `known`. */
function checkOptions(options, call, known) {
  if (options === undefined) return
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw argTypeError('options', `an object { ${known.map((k) => `${k}?`).join(', ')} }`, options)
  }
  checkKeys(options, known, call)
}

module.exports = { registerKeyCheck, checkOptions }
