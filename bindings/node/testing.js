'use strict'
// krabka-coordination/testing: leader code tested without Kafka, on the
// core's in-memory cluster with a clock the test drives. testing.d.ts
// documents each name.

const kc = require('./index.js')

module.exports = require('./lib/testing').makeTesting(kc)
