// The ESM entry of krabka-coordination: the same module as index.js.
import { createRequire } from 'node:module'

const kc = createRequire(import.meta.url)('./index.js')

export default kc
export const {
  Key,
  Registration,
  Lease,
  FencingToken,
  NO_EPOCH,
  encodeKey,
  decodeKey,
  encodeRegistration,
  decodeRegistration,
  encodeLease,
  decodeLease,
  decodeLeases,
  rolePartition,
  murmur2,
  Client,
  Leadership,
  LeadershipEvents,
  Observer,
  LeadershipStatus,
  RoleStateReport,
  logger,
  setLogLevel,
  getLogLevel,
  errorKinds,
  KrabkaError,
  FormatError,
  EncodeError,
  InvalidArgumentError,
  FencedError,
  TransientError,
  FatalError,
  ResignedError,
  CancelledError,
  LeaseExpiredError,
  OutcomeUnknownError,
} = kc
