// The ESM entry of krabka-coordination/testing: the same module as testing.js.
import { createRequire } from 'node:module'

const testing = createRequire(import.meta.url)('./testing.js')

export default testing
export const { TestCluster, TestProcess } = testing
