// Compile-only checks of the error types against the shipped index.d.ts
// (ci/node.sh runs tsc --strict): `code` is a union of string literals, so
// a misspelt code does not compile and `switch (e.code)` narrows `e` to the
// class of each case; every error has `retryable`.
import { KrabkaError, FencingToken, type ErrorCode } from 'krabka-coordination'

export function describe(e: unknown): string {
  if (e instanceof KrabkaError) {
    switch (e.code) {
      case 'FORMAT':
        // Narrowed to FormatError: `part` exists.
        return e.part
      case 'ENCODE':
        // Narrowed to EncodeError: `field` is a string.
        return e.field
      default:
        return `${e.code} retryable=${e.retryable}`
    }
  }
  return String(e)
}

// @ts-expect-error: not a code of the package
export const misspelt: ErrorCode = 'FENCD'

// The wire form of a token parses back to a token.
export const parsed: FencingToken = FencingToken.parse('1004/18')
