// Package guard holds the guardrails every tools/call passes through before a
// tool runs, in this order:
//
//  1. [Sanitize] checks the structure of the raw arguments object: member
//     names are identifiers, nesting and fan-out are bounded, and no string
//     carries control, bidirectional-control or surrogate code points, so no
//     tool ever sees input that could hide text from a human reviewer or
//     smuggle terminal escapes into a log.
//  2. A [Limiter] hands out a bounded number of tool-call slots, first come
//     first served, and refuses a call that waited too long for one.
//  3. The caller then bounds execution with [context.WithTimeout]; this
//     package does not own that deadline because the caller owns the task.
//  4. Package tool decodes the arguments strictly against the tool's schema.
//
// Refusals are [*problem.Problem]s the session can show to the peer as they
// are. Nothing here starts a goroutine or keeps per-call state after it
// returns; both guards are safe for concurrent use.
//
// Guard does not know tools, schemas or sessions: it judges shape, not
// meaning. Do not use Sanitize as a substitute for schema validation.
package guard
