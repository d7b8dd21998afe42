// Node 20 shim for @modelcontextprotocol/conformance: the ESM resolve hook
// that register.mjs registers.
//
// Why: the conformance CLI does `import { globSync } from 'fs'`, which Node
// 20 lacks (it came in Node 22), so the CLI fails to load. For imports of
// 'fs' or 'node:fs' made from the conformance package's own files, and only
// those, this hook resolves to fs-compat.mjs instead; every other import,
// including the real 'node:fs' that fs-compat.mjs itself imports, resolves
// as usual.
//
// When it can go: with Node >= 22 (see register.mjs).
const compat = new URL('./fs-compat.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') &&
      context.parentURL &&
      context.parentURL.includes('/@modelcontextprotocol/conformance/')) {
    return { url: compat, shortCircuit: true };
  }
  return next(specifier, context);
}
