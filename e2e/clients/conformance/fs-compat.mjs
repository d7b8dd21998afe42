// Node 20 shim for @modelcontextprotocol/conformance: the 'fs' that
// hooks.mjs gives the conformance package's files.
//
// Why: the conformance CLI imports globSync from 'fs', which Node 20 lacks
// (Node 22 added it). This module re-exports the real node:fs and adds a
// globSync that throws. Only the CLI's `tier-check` command calls globSync;
// the `server` command the Go tests run never does, so the throw is never
// reached there, and if it ever is, it fails loudly instead of silently.
//
// When it can go: with Node >= 22 (see register.mjs).
import fs from 'node:fs';

export * from 'node:fs';
export default fs;

export function globSync() {
  throw new Error('fs.globSync needs Node >= 22; this Node ' + process.version +
    ' runs the conformance CLI through the Node 20 shim in e2e/clients/conformance, which lacks it');
}
