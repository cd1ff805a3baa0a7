// A test kit cluster whose processes' clients are closed after each case of
// the test file that uses it: a held leadership or a waiting acquire keeps
// Node's event loop alive, as on Kafka, so a file that left one open would
// never exit. A crashed process's client closes at once.
'use strict'

const test = require('node:test')
const testing = require('../testing')

const made = []

class ClosingCluster extends testing.TestCluster {
  process(name) {
    const p = super.process(name)
    made.push(p)
    return p
  }
}

test.afterEach(async () => {
  await Promise.all(made.splice(0).map((p) => p.client.close()))
})

module.exports = { ClosingCluster }
