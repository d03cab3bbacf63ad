import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { endpoints } from '../src/rest/endpoints.js';
import { encodingsOf } from '../src/rest/route.js';
import { startGatewayProcess, stopProcess } from './gateway-process.js';

/**
 * OpenAPI conformance in CI (`npm run conformance`, PRISM=<path of Stoplight Prism's `prism`>):
 * starts the gateway, puts Prism in front of it as a validating proxy for the document the
 * gateway serves, and drives every declared operation through it — with a valid request and
 * with invalid ones, as each identity (none, agent, ticket agent, visitor, internal, API key). Prism
 * reports in `sl-violations` whatever a request or response does that the document does not
 * allow; any response violation, or a request violation on a request meant to be valid, fails
 * the run. Multipart uploads and malformed bodies are left to their own suites (Prism neither
 * builds the one nor forwards the other).
 */
const CAPTCHA = 'conf1';
const INTERNAL_TOKEN = randomBytes(24).toString('hex');
const prismBin = process.env.PRISM ?? 'prism';

type Identity = 'none' | 'agent' | 'ticket' | 'visitor' | 'internal' | 'apiKey';
interface Violation {
  location: string[];
  severity: string | number;
  message: string;
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });

async function startPrism(document: string, upstream: string): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  const child = spawn(prismBin, ['proxy', document, upstream, '--host', '127.0.0.1', '--port', String(port)], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`prism exited with ${child.exitCode}`);
    try {
      await fetch(`${url}/healthz`);
      return { child, url };
    } catch {
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  throw new Error('prism did not listen within 60 s');
}

const { child: gateway, url: upstream } = await startGatewayProcess({
  CAPTCHA_TEST_ANSWER: CAPTCHA,
  INTERNAL_API_TOKEN: INTERNAL_TOKEN,
});
const documentFile = join(mkdtempSync(join(tmpdir(), 'parley-openapi-')), 'openapi.json');
writeFileSync(documentFile, await (await fetch(`${upstream}/openapi.json`)).text());
const prism = await startPrism(documentFile, upstream);

let requests = 0;
const failures: string[] = [];

/** Sends one request through Prism and records what it says the request or response broke. */
async function send(label: string, path: string, init: RequestInit, requestMeantValid: boolean) {
  const res = await fetch(prism.url + path, { ...init, redirect: 'manual', signal: AbortSignal.timeout(15_000) });
  requests += 1;
  await res.arrayBuffer();
  const header = res.headers.get('sl-violations');
  const violations = header ? (JSON.parse(header) as Violation[]) : [];
  for (const v of violations) {
    const where = v.location[0];
    if (where === 'request' && !requestMeantValid) continue;
    failures.push(`${label}: HTTP ${res.status}: ${v.location.join('.')}: ${v.message}`);
  }
  return res;
}

/** Logs in through the proxy (captcha, then the form) and returns the Session ID. */
async function agentToken(username: string) {
  const captcha = await fetch(`${prism.url}/agent/login/logincaptcha`);
  const cookie = (captcha.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
  await captcha.arrayBuffer();
  const res = await fetch(`${prism.url}/agent/login/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', cookie },
    body: JSON.stringify({ username, password: `${username}-password`, captcha: CAPTCHA }),
  });
  const body = (await res.json()) as { data: { token: string } };
  return body.data.token;
}

async function visitorToken() {
  const res = await fetch(`${prism.url}/visitor/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ appkey: 'demo-appkey' }),
  });
  return ((await res.json()) as { data: { token: string } }).data.token;
}

/** An API key of the demo merchant with every scope, created by its admin ada through the proxy. */
async function apiKey() {
  const res = await fetch(`${prism.url}/agent/apikey/create`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', token: await agentToken('ada') },
    body: JSON.stringify({
      name: 'conformance',
      scopes: ['conversations:read', 'messages:write', 'webhooks:manage', 'events:publish'],
    }),
  });
  return ((await res.json()) as { data: { key: string } }).data.key;
}

try {
  const tokens = {
    agent: await agentToken('alice'),
    ticket: await agentToken('tom'),
    visitor: await visitorToken(),
    apiKey: await apiKey(),
  };
  const headersOf: Record<Identity, Record<string, string>> = {
    none: {},
    agent: { token: tokens.agent },
    ticket: { token: tokens.ticket },
    visitor: { authorization: `Bearer ${tokens.visitor}` },
    internal: { authorization: `Bearer ${INTERNAL_TOKEN}` },
    apiKey: { authorization: `Bearer ${tokens.apiKey}` },
  };
  const credentialOf: Record<Identity, string> = {
    none: 'public',
    agent: 'agent',
    ticket: 'agent',
    visitor: 'visitor',
    internal: 'internal',
    apiKey: 'apiKey',
  };
  // What ends an identity runs last, so every other request still has it.
  const ending = new Set(['/agent/logout', '/visitor/token/revoke']);
  const ordered = [...endpoints].sort((a, b) => Number(ending.has(a.path)) - Number(ending.has(b.path)));
  const invalidBodies: unknown[] = [{}, { unexpected: [1, 2] }, [], 'text'];

  for (const route of ordered) {
    const encodings = encodingsOf(route);
    if (encodings.includes('multipart')) continue;
    const method = route.method.toUpperCase();
    if (route.input && route.requestExample === undefined) {
      failures.push(`${method} ${route.path}: declares an input but no requestExample to send`);
      continue;
    }
    for (const identity of Object.keys(headersOf) as Identity[]) {
      const label = `${method} ${route.path} as ${identity}`;
      const headers = headersOf[identity];
      // A request is meant to be valid when it carries the credentials the route declares.
      const fits =
        route.identity === 'public' ||
        route.identity === 'session' ||
        route.identity === credentialOf[identity] ||
        (route.identity === 'participant' && (identity === 'visitor' || identity === 'agent')) ||
        (route.identity === 'adminOrApiKey' && identity === 'apiKey');
      if (route.method === 'get') {
        const query = route.input ? `?${new URLSearchParams(route.requestExample as Record<string, string>)}` : '';
        await send(label, route.path + query, { headers }, fits);
        if (route.input) await send(`${label} (bad query)`, `${route.path}?limit=-1&before=x`, { headers }, false);
        continue;
      }
      if (!route.input) {
        await send(label, route.path, { method, headers }, fits);
        continue;
      }
      const json = { ...headers, 'content-type': 'application/json' };
      if (route.requestExample !== undefined) {
        await send(label, route.path, { method, headers: json, body: JSON.stringify(route.requestExample) }, fits);
      }
      for (const body of invalidBodies) {
        await send(
          `${label} (invalid ${JSON.stringify(body)})`,
          route.path,
          {
            method,
            headers: json,
            body: JSON.stringify(body),
          },
          false,
        );
      }
    }
  }
} finally {
  await stopProcess(prism.child);
  await stopProcess(gateway);
}

for (const failure of failures) console.error(`violation: ${failure}`);
console.log(`conformance: ${requests} requests through Prism, ${failures.length} violations`);
process.exitCode = failures.length === 0 ? 0 : 1;
