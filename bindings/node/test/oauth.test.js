'use strict'
// oauthToken, the OAUTHBEARER token function, without the secured cluster:
// the one-node test cluster listens in PLAINTEXT, and a client set to
// SASL_PLAINTEXT / OAUTHBEARER asks the function for a token before its
// first request. What this shows: the function is called (on the
// JavaScript thread, once for the client's first connect; after a
// rejection the registration producer may ask once more), its rejection,
// a fatal rejection, a value of the wrong shape, an expired token and a
// promise that never settles each fail the operation at once with an error
// that names the token provider and carries the rejection's message; a
// good token is taken and sent (the broker, which speaks no SASL on this
// listener, answers the SASL handshake with IllegalSaslState). That a
// token authenticates is the secured suite's (test_secured.py in Python).

const test = require('node:test')
const assert = require('node:assert/strict')
const kc = require('..')
const { bootstrap } = require('./support')

const CONNECT_TIMEOUT = 5

function oauthClient(oauthToken, options = {}) {
  const settings = {
    'bootstrap.servers': bootstrap(),
    'security.protocol': 'SASL_PLAINTEXT',
    'sasl.mechanism': 'OAUTHBEARER',
  }
  return new kc.Client(settings, { connectTimeout: CONNECT_TIMEOUT, ...options, oauthToken })
}

/** The error `checkStateTopic` rejects with, how long it took, and the
 * calls of the function. */
async function failure(provide, options) {
  const calls = []
  const client = oauthClient(async () => {
    calls.push({ mainThread: require('node:worker_threads').isMainThread })
    return provide()
  }, options)
  const started = Date.now()
  try {
    await client.checkStateTopic()
    assert.fail('checkStateTopic resolved')
  } catch (e) {
    return { error: e, ms: Date.now() - started, calls }
  } finally {
    client.close()
  }
}

/** After a rejection the source keeps no token, so besides the
 * operation's own call the client's registration producer, which
 * librdkafka has ask for a token when it starts (on its polling thread),
 * may call the function once more: when its request comes after the first
 * call failed rather than while it ran (a caller that waits for a call in
 * flight shares its outcome). Every call runs on the JavaScript thread. */
function calledOnceOrTwice(calls) {
  assert.ok(calls.length === 1 || calls.length === 2, `called ${calls.length} times`)
  assert.ok(calls.every((c) => c.mainThread))
}

test('a rejection of the function fails the operation at once with its message', async () => {
  const { error, ms, calls } = await failure(() => {
    throw new Error('the identity provider is unreachable')
  })
  calledOnceOrTwice(calls)
  assert.ok(error instanceof kc.TransientError, `${error}`)
  assert.match(error.message, /token provider/)
  assert.match(error.message, /the oauth_token function rejected: Error: the identity provider is unreachable/)
  assert.match(error.cause.message, /the identity provider is unreachable/)
  assert.ok(ms < CONNECT_TIMEOUT * 1000, `took ${ms} ms`)
})

test('a rejection with FatalError is fatal', async () => {
  const { error, calls } = await failure(() => {
    throw new kc.FatalError('the client credentials were revoked')
  })
  calledOnceOrTwice(calls)
  assert.ok(error instanceof kc.FatalError, `${error}`)
  assert.match(error.message, /token provider.*FatalError: the client credentials were revoked/)
})

test('a value of the wrong shape is refused, naming what is wrong', async () => {
  const cases = [
    [() => 'a token', /the value of oauth_token must be an object \{ token: string, expiresAt/],
    [() => ({ token: 42, expiresAt: Date.now() + 3600_000 }), /the token must be a string, got number/],
    [() => ({ token: 'eyJ', expiresAt: '1h' }), /the token's expiry must be a Date or a number of milliseconds since the epoch, got string/],
    [() => ({ token: 'eyJ', expiresAt: Date.now() + 3600_000, principal: 7 }), /the token's principal must be a string, got number/],
    [() => ({ token: 'eyJ', expiresAt: Date.now() + 3600_000, extensions: { traceId: 'x' } }), /SASL extensions are not supported/],
    [() => ({ token: 'eyJ', expiresAt: Date.now() - 1000 }), /expire/],
  ]
  for (const [provide, message] of cases) {
    const { error, ms, calls } = await failure(provide)
    assert.ok(calls.length >= 1, `${provide}: called ${calls.length} times`)
    assert.ok(error instanceof kc.InvalidArgumentError, `${provide}: ${error}`)
    assert.match(error.message, /token provider/)
    assert.match(error.message, message)
    assert.ok(ms < CONNECT_TIMEOUT * 1000, `took ${ms} ms`)
  }
})

test('a promise that never settles fails the operation at the connect timeout', async () => {
  const { error, ms, calls } = await failure(() => new Promise(() => {}), { connectTimeout: 1 })
  assert.equal(calls.length, 1)
  assert.ok(error instanceof kc.TransientError, `${error}`)
  assert.match(error.message, /the oauth_token function did not settle within 1 s /)
  assert.ok(ms >= 900, `took ${ms} ms`)
})

test('a good token is taken and sent in the SASL handshake', async () => {
  const { error, calls } = await failure(() => ({
    token: 'eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.',
    expiresAt: new Date(Date.now() + 3600_000),
    principal: 'admin',
  }))
  assert.equal(calls.length, 1)
  // Past the token: the broker's PLAINTEXT listener refuses the handshake.
  assert.ok(error instanceof kc.FatalError, `${error}`)
  assert.match(error.message, /SASL OAUTHBEARER authentication with a token from the token provider/)
  assert.doesNotMatch(error.message, /oauth_token/)
})

test('oauthToken must be a function; OAUTHBEARER needs one', () => {
  assert.throws(() => oauthClient('a token'), { name: 'InvalidArgumentError', code: 'INVALID_ARGUMENT', field: 'oauth_token', message: 'oauth_token must be a function, got string' })
  assert.throws(
    () => new kc.Client({ 'bootstrap.servers': bootstrap(), 'security.protocol': 'SASL_PLAINTEXT', 'sasl.mechanism': 'OAUTHBEARER' }),
    (e) => e instanceof kc.InvalidArgumentError && /token provider/.test(e.message),
  )
})

test('a client with a token function does not keep the process alive', async () => {
  const { execFile } = require('node:child_process')
  const script = `
    const kc = require(${JSON.stringify(require.resolve('..'))})
    const c = new kc.Client({ 'bootstrap.servers': ${JSON.stringify(bootstrap())}, 'security.protocol': 'SASL_PLAINTEXT', 'sasl.mechanism': 'OAUTHBEARER' },
      { oauthToken: async () => { throw new Error('no token') } })
    c.checkStateTopic().catch((e) => console.log(e.code))
  `
  const out = await new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', script], { timeout: 30_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`the child did not exit by itself: ${err.message} ${stderr}`))
      else resolve(stdout)
    })
  })
  assert.equal(out, 'TRANSIENT\n')
})
