'use strict'
// The value classes: plain, frozen JavaScript objects (a field is a
// property read, no call into the addon). Their rules are the core's: the
// constructors' checks (with the shared crate's wording), the token order,
// the codec (src/values.rs, src/functions.rs). The addon makes decoded values
// through the factories registered below, without checking them again.

const { argTypeError, InvalidArgumentError } = require('./errors')

// Passed by the factories: the fields come from the core, already checked.
const CHECKED = Symbol('checked')

// The range of a Date: 8.64e15 ms either side of the epoch.
const DATE_LIMIT = 8_640_000_000_000_000n

/** The Date of an epoch-millisecond time of the package (a `bigint` such as
 * `lease.deadline`, or a `number`); a time outside a Date's range (a
 * decoded record can hold any i64) is an InvalidArgumentError. */
function toDate(epochMs) {
  if (typeof epochMs === 'bigint') {
    if (epochMs > DATE_LIMIT || epochMs < -DATE_LIMIT) {
      const error = new InvalidArgumentError(`epoch_ms must be within a Date's range (+-8.64e15 ms), got ${epochMs}`)
      error.field = 'epoch_ms'
      throw error
    }
    return new Date(Number(epochMs))
  }
  if (typeof epochMs !== 'number') throw argTypeError('epoch_ms', 'a bigint or a number of epoch milliseconds', epochMs)
  const date = new Date(epochMs)
  if (Number.isNaN(date.getTime())) {
    const error = new InvalidArgumentError(`epoch_ms must be within a Date's range (+-8.64e15 ms), got ${epochMs}`)
    error.field = 'epoch_ms'
    throw error
  }
  return date
}

function makeValues(native) {
  class FencingToken {
    constructor(producerId, producerEpoch, checked) {
      if (checked !== CHECKED) [producerId, producerEpoch] = native._tokenArgs(producerId, producerEpoch)
      this.producerId = producerId
      this.producerEpoch = producerEpoch
      Object.freeze(this)
    }

    compare(other) {
      if (!(other instanceof FencingToken)) throw argTypeError('other', 'a FencingToken', other)
      return native._compareTokens(this, other)
    }

    equals(other) {
      return other instanceof FencingToken && native._compareTokens(this, other) === 0
    }

    get isNoEpoch() {
      return native._isNoEpoch(this)
    }

    /** The wire form, the core's text: `PRODUCER_ID/EPOCH` (`'4001/7'`), or
     * `'NoEpoch'` for NO_EPOCH. `FencingToken.parse` reads it back. */
    toString() {
      return native._tokenText(this)
    }

    /** `JSON.stringify` writes the wire form (a string). */
    toJSON() {
      return this.toString()
    }

    /** The token of a wire form (`'4001/7'`, `'NoEpoch'`), parsed by the
     * core; other text throws an InvalidArgumentError with its message. */
    static parse(text) {
      return native._parseToken(text)
    }
  }

  class Key {
    constructor(kind, role, member, checked) {
      if (checked !== CHECKED) throw new InvalidArgumentError('use Key.registration(role, member) or Key.lease(role)')
      this.kind = kind
      this.role = role
      this.member = member
      Object.freeze(this)
    }

    static registration(role, member) {
      const [r, m] = native._keyArgs(role, member)
      return new Key('registration', r, m, CHECKED)
    }

    static lease(role) {
      const [r] = native._keyArgs(role, '')
      return new Key('lease', r, '', CHECKED)
    }

    equals(other) {
      return other instanceof Key && other.kind === this.kind && other.role === this.role && other.member === this.member
    }

    toString() {
      return this.kind === 'lease'
        ? `Key.lease(${JSON.stringify(this.role)})`
        : `Key.registration(${JSON.stringify(this.role)}, ${JSON.stringify(this.member)})`
    }
  }

  class Registration {
    constructor(member, registeredAt, checked) {
      if (checked !== CHECKED) [member, registeredAt] = native._registrationArgs(member, registeredAt)
      this.member = member
      this.registeredAt = registeredAt
      Object.freeze(this)
    }

    equals(other) {
      return other instanceof Registration && other.member === this.member && other.registeredAt === this.registeredAt
    }

    toString() {
      return `Registration(${JSON.stringify(this.member)}, ${this.registeredAt}n)`
    }
  }

  class Lease {
    constructor(member, token, grantedAt, deadline, checked) {
      if (checked !== CHECKED) {
        if (!(token instanceof FencingToken)) throw argTypeError('token', 'a FencingToken', token)
        ;[member, grantedAt, deadline] = native._leaseArgs(member, grantedAt, deadline)
      }
      this.member = member
      this.token = token
      this.grantedAt = grantedAt
      this.deadline = deadline
      Object.freeze(this)
    }

    equals(other) {
      return (
        other instanceof Lease &&
        other.member === this.member &&
        other.token.equals(this.token) &&
        other.grantedAt === this.grantedAt &&
        other.deadline === this.deadline
      )
    }

    toString() {
      return `Lease(${JSON.stringify(this.member)}, ${this.token}, ${this.grantedAt}n, ${this.deadline}n)`
    }
  }

  for (const cls of [Key, Registration, Lease]) {
    Object.defineProperty(cls.prototype, Symbol.for('nodejs.util.inspect.custom'), {
      value() {
        return this.toString()
      },
    })
  }
  Object.defineProperty(FencingToken.prototype, Symbol.for('nodejs.util.inspect.custom'), {
    value() {
      return `FencingToken(${this.toString()})`
    },
  })

  native._registerFactories(
    (id, epoch) => new FencingToken(id, epoch, CHECKED),
    (kind, role, member) => new Key(kind, role, member, CHECKED),
    (member, at) => new Registration(member, at, CHECKED),
    (member, id, epoch, grantedAt, deadline) => new Lease(member, new FencingToken(id, epoch, CHECKED), grantedAt, deadline, CHECKED),
  )

  const encoder = (cls, field, encode) => (value) => {
    if (!(value instanceof cls)) throw argTypeError(field, `a ${cls.name}`, value)
    return encode(value)
  }

  // The integers of a decoded value, written by the core and read at once
  // (one JavaScript thread; every worker loads its own copy of this module).
  // Building the object here costs one N-API call and a string per decode;
  // building it through N-API cost a call back into JavaScript and a BigInt
  // per field (docs/benchmarks/node.md).
  const scratch = new BigInt64Array(4)
  const decodeLease = (data) => {
    const member = native._decodeLeaseInto(data, scratch)
    return new Lease(
      member,
      new FencingToken(scratch[0], Number(scratch[1]), CHECKED),
      scratch[2],
      scratch[3],
      CHECKED,
    )
  }
  // The batch's scratch, grown as needed and kept (about 5 x 8 bytes per
  // value of the largest batch decoded).
  let batchScratch = new BigInt64Array(81)
  const decodeLeases = (values) => {
    const need = 1 + 5 * (Array.isArray(values) ? values.length : 0)
    if (batchScratch.length < need) batchScratch = new BigInt64Array(need)
    const out = batchScratch
    // out[0]: how many were decoded; out[1 + 5i .. 1 + 5i + 5]: value i's
    // integers, and where its member ends in `members`, every member one
    // after the other.
    const members = native._decodeLeasesInto(values, out)
    if (typeof members === 'number') {
      // Element `members` is not a lease value: decoded alone, it throws
      // the error a single decode would, with its index.
      try {
        decodeLease(values[members])
      } catch (e) {
        e.message = `values[${members}]: ${e.message}`
        e.index = members
        throw e
      }
      throw new Error(`krabka-coordination: internal: values[${members}] changed while it was decoded`)
    }
    const n = Number(out[0])
    const leases = new Array(n)
    for (let i = 0, k = 1, start = 0; i < n; i++, k += 5) {
      const end = Number(out[k + 4])
      leases[i] = new Lease(members.substring(start, end), new FencingToken(out[k], Number(out[k + 1]), CHECKED), out[k + 2], out[k + 3], CHECKED)
      start = end
    }
    return leases
  }
  const decodeRegistration = (data) => {
    const member = native._decodeRegistrationInto(data, scratch)
    return new Registration(member, scratch[0], CHECKED)
  }

  return {
    toDate,
    FencingToken,
    Key,
    Registration,
    Lease,
    decodeLease,
    decodeLeases,
    decodeRegistration,
    NO_EPOCH: native._noEpoch(),
    encodeKey: encoder(Key, 'key', native._encodeKey),
    encodeRegistration: encoder(Registration, 'registration', native._encodeRegistration),
    encodeLease: encoder(Lease, 'lease', native._encodeLease),
  }
}

module.exports = { makeValues }
