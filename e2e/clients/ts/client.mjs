#!/usr/bin/env node
// client.mjs is a generic MCP client built on the official TypeScript SDK
// (@modelcontextprotocol/sdk). The Go e2e tests run it against a stdio
// server to prove that a third-party client interoperates with it: the
// handshake, tools/list and tools/call, with every structured result checked
// against the tool's outputSchema.
//
// Usage:
//
//   node client.mjs [--env JSON] [--calls JSON] [--timeout-ms N] -- COMMAND [ARG...]
//   node client.mjs --url URL [--calls JSON] [--timeout-ms N]
//
//   --env    JSON object of extra environment variables for the server. The
//            server gets only PATH and HOME from this process, plus these.
//   --calls  JSON array of calls, run in order:
//              [{"name": "tool", "arguments": {...}, "expect": "ok"}]
//            expect is "ok" (default: the call succeeds with isError false),
//            "toolError" (isError true) or "protocolError" (a JSON-RPC error).
//   --timeout-ms  bound of each request (default 20000).
//   --url    connect over Streamable HTTP to URL instead of running a
//            server command (serverExit is then null).
//
// It prints exactly one JSON line to stdout:
//
//   {"ok": bool, "requestedProtocolVersion": "...", "protocolVersion": "...",
//    "serverInfo": {...}, "tools": ["name", ...],
//    "calls": [{"name", "expect", "isError", "structuredContent",
//               "textMatchesStructured", "error": {"code", "message"}}],
//    "serverExit": {"code", "signal"} | null, "failures": ["..."]}
//
// and exits 0 only when every step met its expectation. The server's
// stderr is passed through to this process's stderr.

import process from 'node:process';
import { parseArgs } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION, McpError } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';

const EXPECTATIONS = new Set(['ok', 'toolError', 'protocolError']);

function usage(msg) {
    process.stderr.write(`client.mjs: ${msg}\n` +
        'usage: node client.mjs [--env JSON] [--calls JSON] [--timeout-ms N] -- COMMAND [ARG...]\n' +
        '       node client.mjs --url URL [--calls JSON] [--timeout-ms N]\n');
    process.exit(2);
}

function parseJSON(flag, text, check) {
    let v;
    try {
        v = JSON.parse(text);
    } catch (err) {
        usage(`${flag}: ${err.message}`);
    }
    if (!check(v)) {
        usage(`${flag}: unexpected shape`);
    }
    return v;
}

const { values: opts, positionals } = parseArgs({
    options: {
        env: { type: 'string', default: '{}' },
        calls: { type: 'string', default: '[]' },
        'timeout-ms': { type: 'string', default: '20000' },
        url: { type: 'string' },
    },
    allowPositionals: true,
    strict: true,
});
if (positionals.length === 0 && opts.url === undefined) {
    usage('missing server command');
}
if (positionals.length > 0 && opts.url !== undefined) {
    usage('--url and a server command exclude each other');
}
const [command, ...args] = positionals;
const extraEnv = parseJSON('--env', opts.env,
    v => v !== null && typeof v === 'object' && !Array.isArray(v) && Object.values(v).every(x => typeof x === 'string'));
const calls = parseJSON('--calls', opts.calls,
    v => Array.isArray(v) && v.every(c => c !== null && typeof c === 'object' && typeof c.name === 'string' &&
        (c.expect === undefined || EXPECTATIONS.has(c.expect))));
const timeout = Number(opts['timeout-ms']);
if (!Number.isInteger(timeout) || timeout <= 0) {
    usage('--timeout-ms must be a positive integer');
}

// The transport merges the SDK's default environment (HOME, LOGNAME, PATH,
// SHELL, TERM, USER) into whatever env it is given. Node's spawn skips
// undefined values, so naming every default key as undefined first leaves
// the server exactly PATH, HOME and the test's own variables.
const env = {};
for (const key of Object.keys(getDefaultEnvironment())) {
    env[key] = undefined;
}
for (const key of ['PATH', 'HOME']) {
    if (process.env[key] !== undefined) {
        env[key] = process.env[key];
    }
}
Object.assign(env, extraEnv);

const summary = {
    ok: false,
    requestedProtocolVersion: LATEST_PROTOCOL_VERSION,
    protocolVersion: null,
    serverInfo: null,
    tools: [],
    calls: [],
    serverExit: null,
    sessionId: null,
    failures: [],
};
const fail = msg => summary.failures.push(msg);

const transport = opts.url !== undefined
    ? new StreamableHTTPClientTransport(new URL(opts.url))
    : new StdioClientTransport({ command, args, env, stderr: 'inherit' });
// The client hands the negotiated version to transports that want it
// (HTTP ones put it in a header, so theirs is kept); stdio does not, so
// this optional hook is the one public place where the negotiated version
// can be observed.
const setVersion = transport.setProtocolVersion?.bind(transport);
transport.setProtocolVersion = v => {
    summary.protocolVersion = v;
    setVersion?.(v);
};
transport.onerror = err => fail(`transport: ${err.message}`);

// The SDK validates structuredContent against the outputSchema of every
// tool it has seen in tools/list; the validator is passed explicitly so that
// it is visibly on. Its Ajv instance follows draft-07, while MCP 2025-11-25
// schemas default to JSON Schema 2020-12, so results are checked a second
// time with a 2020-12 validator below.
const client = new Client(
    { name: 'bastion-e2e-ts', version: '1.0.0' },
    { capabilities: {}, jsonSchemaValidator: new AjvJsonSchemaValidator() },
);
const ajv2020 = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });

/** Returns whether the single text block holds exactly the structured result. */
function textMatches(result) {
    const texts = (result.content ?? []).filter(c => c.type === 'text');
    if (texts.length !== 1) {
        return false;
    }
    try {
        return JSON.stringify(JSON.parse(texts[0].text)) === JSON.stringify(result.structuredContent);
    } catch {
        return false;
    }
}

async function session() {
    await client.connect(transport, { timeout });
    summary.serverInfo = client.getServerVersion() ?? null;

    const listed = await client.listTools(undefined, { timeout });
    summary.tools = listed.tools.map(t => t.name);
    const validators = new Map(listed.tools.filter(t => t.outputSchema).map(t => [t.name, ajv2020.compile(t.outputSchema)]));

    for (const c of calls) {
        const expect = c.expect ?? 'ok';
        const rec = { name: c.name, expect, isError: null, structuredContent: null, textMatchesStructured: null, error: null };
        summary.calls.push(rec);
        let result;
        try {
            result = await client.callTool({ name: c.name, arguments: c.arguments ?? {} }, undefined, { timeout });
        } catch (err) {
            rec.error = { code: err instanceof McpError ? err.code : null, message: err.message };
            if (expect !== 'protocolError') {
                fail(`${c.name}: ${err.message}`);
            }
            continue;
        }
        rec.isError = result.isError === true;
        rec.structuredContent = result.structuredContent ?? null;
        if (expect === 'protocolError') {
            fail(`${c.name}: expected a JSON-RPC error, got a result`);
        } else if (rec.isError !== (expect === 'toolError')) {
            fail(`${c.name}: isError is ${rec.isError}, expected ${expect}`);
        }
        if (rec.isError) {
            continue;
        }
        const validate = validators.get(c.name);
        if (validate) {
            if (result.structuredContent === undefined) {
                fail(`${c.name}: the tool has an outputSchema but returned no structuredContent`);
                continue;
            }
            if (!validate(result.structuredContent)) {
                fail(`${c.name}: structuredContent fails the outputSchema (2020-12): ${ajv2020.errorsText(validate.errors)}`);
            }
            rec.textMatchesStructured = textMatches(result);
        }
    }
}

// The transport keeps its child private; the exit status is read from it
// only to report whether the server ended cleanly after stdin closed.
function watchExit() {
    const child = transport._process;
    if (!child) {
        return Promise.resolve();
    }
    return new Promise(resolve => {
        if (child.exitCode !== null || child.signalCode !== null) {
            summary.serverExit = { code: child.exitCode, signal: child.signalCode };
            resolve();
            return;
        }
        child.once('exit', (code, signal) => {
            summary.serverExit = { code, signal };
            resolve();
        });
    });
}

let exited = Promise.resolve();
try {
    const started = transport.start.bind(transport);
    transport.start = async () => {
        await started();
        exited = watchExit();
    };
    await session();
} catch (err) {
    fail(`session: ${err.message}`);
} finally {
    if (opts.url !== undefined) {
        // A legacy HTTP session ends with DELETE.
        summary.sessionId = transport.sessionId !== undefined;
        await transport.terminateSession().catch(err => fail(`terminateSession: ${err.message}`));
    }
    // close ends the server's stdin and waits for it to exit (the SDK
    // escalates to signals after two seconds each).
    await client.close().catch(err => fail(`close: ${err.message}`));
    await exited;
}
if (summary.serverExit && (summary.serverExit.code !== 0 || summary.serverExit.signal !== null)) {
    fail(`server exited with code ${summary.serverExit.code}, signal ${summary.serverExit.signal}`);
}
summary.ok = summary.failures.length === 0;
process.stdout.write(JSON.stringify(summary) + '\n');
process.exitCode = summary.ok ? 0 : 1;
