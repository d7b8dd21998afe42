#!/usr/bin/env node
// server.mjs is a Streamable HTTP MCP server on the official TypeScript
// SDK (@modelcontextprotocol/sdk), written the way its documentation
// writes a stateless server: a new McpServer and transport for every
// request, JSON responses, no session id. The Go e2e tests put the
// gateway in front of it with the default `protocol: auto`, so that the
// gateway's HTTP connector meets a server nobody here wrote — one that
// refuses the 2026-07-28 server/discover with HTTP 400 and an error whose
// id is null.
//
// Usage:
//
//   node server.mjs [--port N]
//
// It listens on 127.0.0.1 (port 0, the default, picks a free one), prints
// one line `listening http://127.0.0.1:PORT/mcp` to stdout, and serves
// until it is killed. Its one tool, echo({text}), answers the text back
// as text content.

import http from 'node:http';
import process from 'node:process';
import { parseArgs } from 'node:util';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

const { values } = parseArgs({ options: { port: { type: 'string', default: '0' } } });

function makeServer() {
    const server = new McpServer({ name: 'ts-sdk-echo', version: '1.0.0' });
    server.registerTool('echo', {
        description: 'Echoes its text.',
        inputSchema: { text: z.string() },
    }, async ({ text }) => ({ content: [{ type: 'text', text }] }));
    return server;
}

const httpServer = http.createServer(async (req, res) => {
    if (req.method !== 'POST') {
        res.writeHead(405, { Allow: 'POST' }).end();
        return;
    }
    let body = '';
    for await (const chunk of req) {
        body += chunk;
    }
    let parsed;
    try {
        parsed = JSON.parse(body);
    } catch {
        res.writeHead(400).end();
        return;
    }
    const server = makeServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
        transport.close();
        server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, parsed);
});

httpServer.listen(Number(values.port), '127.0.0.1', () => {
    process.stdout.write(`listening http://127.0.0.1:${httpServer.address().port}/mcp\n`);
});
