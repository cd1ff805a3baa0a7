'use strict'
// The value classes: plain, frozen JavaScript objects (a field is a
// property read, no call into the addon). Their rules are the core's: the
// constructors' checks (with the shared crate's wording), the token order,
// the codec (src/values.rs, src/functions.rs). The addon makes decoded values
// through the factories registered below, without checking them again.

const { argTypeError } = require('./errors')

// Passed by the factories: the fields come from the core, already checked.
const CHECKED = Symbol('checked')

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

    toString() {
      return `FencingToken(${this.producerId}n, ${this.producerEpoch})`
    }
  }

  class Key {
    constructor(kind, role, member, checked) {
      if (checked !== CHECKED) throw new TypeError('use Key.registration(role, member) or Key.lease(role)')
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

  for (const cls of [FencingToken, Key, Registration, Lease]) {
    Object.defineProperty(cls.prototype, Symbol.for('nodejs.util.inspect.custom'), {
      value() {
        return this.toString()
      },
    })
  }

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

  return {
    FencingToken,
    Key,
    Registration,
    Lease,
    NO_EPOCH: native._noEpoch(),
    encodeKey: encoder(Key, 'key', native._encodeKey),
    encodeRegistration: encoder(Registration, 'registration', native._encodeRegistration),
    encodeLease: encoder(Lease, 'lease', native._encodeLease),
  }
}

module.exports = { makeValues }
