// Node 20 shim for @modelcontextprotocol/conformance, loaded with
//   node --import ./register.mjs node_modules/@modelcontextprotocol/conformance/dist/index.js ...
//
// Why: the conformance CLI (0.1.14 and later, pinned here at 0.1.16) does
// `import { globSync } from 'fs'`, which exists only from Node 22, so on
// Node 20 the whole CLI dies at load, before any command runs. globSync is
// used only by its `tier-check` command; `server`, which the Go tests run,
// never calls it. This file registers hooks.mjs, which hands the suite's
// own files an 'fs' that has every real export plus a globSync that throws.
//
// When it can go: once the machines that run the tests have Node >= 22.
// Then delete register.mjs, hooks.mjs and fs-compat.mjs, and drop the
// `--import` argument in e2e/gateway_conformance_test.go.
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
