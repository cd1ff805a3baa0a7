// The ESM entry of krabka-coordination/stores: the same module as stores.js.
import { createRequire } from 'node:module'

const stores = createRequire(import.meta.url)('./stores.js')

export default stores
export const { fence, migrate } = stores
