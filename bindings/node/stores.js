'use strict'
// krabka-coordination/stores: fenced writes to PostgreSQL (pg) and SQLite
// (better-sqlite3), both optional peer dependencies. stores.d.ts documents
// each name.

const kc = require('./index.js')

module.exports = require('./lib/stores').makeStores(kc)
