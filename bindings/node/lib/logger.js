'use strict'
// The core's log records as JavaScript events: `logger`, an EventEmitter
// that emits 'log' with each record at or above the chosen level
// (setLogLevel, 'warn' by default). The records come from the core's
// `tracing` events through the shared crate's forwarder (src/log.rs): queued
// off the tokio and librdkafka threads, delivered here on the JavaScript
// thread in batches. Nothing is forwarded while no 'log' listener is
// attached; the delivery never keeps the process alive.

const { EventEmitter } = require('node:events')
const { InvalidArgumentError } = require('./errors')

const LEVELS = ['error', 'warn', 'info', 'debug', 'trace']

function makeLogger(native) {
  let level = 'warn'
  const logger = new EventEmitter()
  const rank = (l) => LEVELS.indexOf(l)
  // The native switch: the level while someone listens, else off.
  const sync = () => native._setLogLevel(logger.listenerCount('log') > 0 ? level : null)

  native._installLogging((records) => {
    // A level lowered while a batch was on its way: the batch is held to the
    // level now chosen.
    const most = rank(level)
    for (const record of records) {
      if (rank(record.level) > most) continue
      // A listener that throws is the process's uncaught error, as with any
      // emitter; the next records are still delivered.
      try {
        logger.emit('log', Object.freeze(record))
      } catch (e) {
        process.nextTick(() => {
          throw e
        })
      }
    }
  })
  // 'newListener' fires just before the listener is added (forwarding
  // starts at once), 'removeListener' just after it is removed.
  logger.on('newListener', (name) => {
    if (name === 'log') native._setLogLevel(level)
  })
  logger.on('removeListener', (name) => {
    if (name === 'log') sync()
  })

  function setLogLevel(l) {
    if (!LEVELS.includes(l)) {
      const error = new InvalidArgumentError(`level must be one of ${LEVELS.map((x) => `'${x}'`).join(', ')}, got ${typeof l === 'string' ? JSON.stringify(l) : typeof l}`)
      error.field = 'level'
      throw error
    }
    level = l
    sync()
  }

  function getLogLevel() {
    return level
  }

  return { logger, setLogLevel, getLogLevel }
}

module.exports = { makeLogger, LEVELS }
