import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';

// Issue 32: the first-party client installs with one documented command from the gateway it
// talks to, runs in plain Node as installed, and the client snippets of the docs run as written.

const run = promisify(execFile);
let t: TestApp;
let project: string;
beforeAll(async () => {
  t = await startTestApp();
  project = mkdtempSync(join(tmpdir(), 'parley-client-install-'));
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  // As documented: `npm install <gateway>/client/parley-client.tgz`. Its peer dependencies and the
  // GraphQL libraries come from this project's node_modules: the test reaches no registry.
  await run('npm', ['install', '--no-audit', '--no-fund', '--legacy-peer-deps', `${t.url}/client/parley-client.tgz`], {
    cwd: project,
  });
  for (const dep of ['graphql-ws', 'ws', 'graphql', '@apollo/client', '@urql/core', 'rxjs', 'pusher-js']) {
    mkdirSync(dirname(join(project, 'node_modules', dep)), { recursive: true });
    symlinkSync(resolve('node_modules', dep), join(project, 'node_modules', dep), 'dir');
  }
}, 60_000);
afterAll(async () => {
  await t?.stop();
  if (project) rmSync(project, { recursive: true, force: true });
});

describe('@parley/client installs from the gateway', () => {
  it('`npm install <gateway>/client/parley-client.tgz` installs a package that subscribes and receives an event', async () => {
    const { token } = await agentSession(t.url, 'alice');
    const script = `
      import { createParleyClient } from '@parley/client';
      import WebSocket from 'ws';
      const parley = createParleyClient({
        url: ${JSON.stringify(t.wsUrl)}, webSocketImpl: WebSocket,
        identity: () => ({ appkey: 'demo-appkey', token: ${JSON.stringify(token)} }),
      });
      const sub = parley.subscribe('agent-a_alice', {
        onEvent: async (e) => { console.log(JSON.stringify(e.data)); await parley.close(); },
      });
      const ready = setInterval(async () => {
        if (sub.position() === undefined) return;
        clearInterval(ready);
        await fetch(${JSON.stringify(`${t.url}/internal/events`)}, {
          method: 'POST',
          headers: { authorization: 'Bearer ${INTERNAL_TOKEN}', 'content-type': 'application/json' },
          body: JSON.stringify({ channel: 'agent-a_alice', event: 'test.installed', data: { ok: 'installed' } }),
        });
      }, 50);
    `;
    writeFileSync(join(project, 'consumer.mjs'), script);
    const { stdout } = await run(process.execPath, ['consumer.mjs'], { cwd: project, timeout: 20_000 });
    expect(JSON.parse(stdout.trim())).toEqual({ ok: 'installed' });
  }, 60_000);

  it('the tarball holds the package and its adapters, typed', async () => {
    const res = await fetch(`${t.url}/client/parley-client.tgz`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/gzip');
    const listing = await new Promise<string>((done, fail) => {
      const child = execFile('tar', ['-tzf', '-'], (error, stdout) => (error ? fail(error) : done(stdout)));
      res.arrayBuffer().then((body) => child.stdin?.end(Buffer.from(body)));
    });
    expect(listing.split('\n').filter(Boolean).sort()).toEqual(
      [
        'package.json',
        'README.md',
        'index.js',
        'index.d.ts',
        'operation.js',
        'operation.d.ts',
        'apollo.js',
        'apollo.d.ts',
        'urql.js',
        'urql.d.ts',
        'pusher.js',
        'pusher.d.ts',
      ]
        .map((f) => `package/${f}`)
        .sort(),
    );
  });
});

/** The code blocks of the docs (or the client's README) marked `<!-- snippet: name -->`, exactly as written. */
function docSnippet(name: string, file = 'docs/realtime.md'): string {
  const text = readFileSync(file, 'utf8');
  const match = new RegExp(`<!-- snippet: ${name} -->\\n\`\`\`js\\n([\\s\\S]*?)\\n\`\`\`\\n`).exec(text);
  if (!match?.[1]) throw new Error(`${file} has no snippet ${name}`);
  return match[1];
}

/** Every snippet name a file marks. */
const snippetNames = (file: string) =>
  [...readFileSync(file, 'utf8').matchAll(/<!-- snippet: ([\w-]+) -->/g)].map((m) => m[1] as string);

/**
 * Runs a snippet as written in a module of the installed project: a prelude gives it the values
 * an application has (the bootstrap's ws_address, the identity…), an epilogue proves it works
 * by printing one event it received; the test publishes until that event arrives.
 */
async function runSnippet(
  name: string,
  channel: string,
  values: Record<string, unknown>,
  epilogue: string,
  file = 'docs/realtime.md',
) {
  const prelude = Object.entries(values)
    .map(([key, value]) => `const ${key} = ${JSON.stringify(value)};`)
    .join('\n');
  const helpers = `
    const done = (data) => { console.log(JSON.stringify(data)); process.exit(0); };
    const show = (e) => { if (e.event === 'test.snippet') done(e.data); };
    const relogin = async () => {}; const reloadWorkbench = () => {}; const reloadBootstrap = () => {};
    const reloadHistory = () => {};`;
  const script = join(project, `${name}.mjs`);
  writeFileSync(script, `${prelude}\n${helpers}\n${docSnippet(name, file)}\n${epilogue}\n`);
  const child = run(process.execPath, [script], { cwd: project, timeout: 30_000 });
  let finished = false;
  void child.finally(() => {
    finished = true;
  });
  const internal = new HttpClient(t.url);
  while (!finished) {
    await internal.json('/internal/events', {
      method: 'POST',
      headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
      json: { channel, event: 'test.snippet', data: { snippet: name } },
    });
    await new Promise((r) => setTimeout(r, 200));
  }
  const { stdout } = await child;
  return stdout.trim().split('\n');
}

describe('the client snippets of the docs run as written', () => {
  it('@parley/client: an agent subscribes to its channel and sees an event', async () => {
    const { token } = await agentSession(t.url, 'alice');
    const values = { wsAddress: t.wsUrl, appkey: 'demo-appkey', token, agentId: 'a_alice' };
    expect(await runSnippet('parley-client', 'agent-a_alice', values, '')).toEqual([
      JSON.stringify({ snippet: 'parley-client' }),
    ]);
  }, 60_000);

  it('Apollo Client: queries over HttpLink with the identity, subscribes through the Parley link', async () => {
    const { token } = await agentSession(t.url, 'alice');
    const values = { wsAddress: t.wsUrl, appkey: 'demo-appkey', token, origin: t.url };
    const epilogue = `
      import { gql } from '@apollo/client';
      const { data } = await apollo.query({ query: gql\`query Me { currentAgent { agentId } }\` });
      console.log(JSON.stringify(data.currentAgent.agentId));
      apollo.subscribe({ query: gql\`subscription Feed { channel(name: "agent-a_alice") { event data } }\` })
        .subscribe({ next: ({ data }) => { if (data.channel.event === 'test.snippet') done(data.channel.data); } });`;
    expect(await runSnippet('apollo', 'agent-a_alice', values, epilogue)).toEqual([
      JSON.stringify('a_alice'),
      JSON.stringify({ snippet: 'apollo' }),
    ]);
  }, 60_000);

  it('urql: a visitor queries with its bearer token and subscribes to its channel through the Parley exchange', async () => {
    const { token: visitorTokenValue } = await visitorToken(t.url);
    const { body } = await new HttpClient(t.url).json<{ visitor: { channel: string } }>('/visitor/data/get', {
      headers: { authorization: `Bearer ${visitorTokenValue}` },
    });
    const channel = body.data.visitor.channel;
    const values = { wsAddress: t.wsUrl, appkey: 'demo-appkey', visitorToken: visitorTokenValue, origin: t.url };
    const epilogue = `
      const { data } = await urql.query('query Boot { visitorBootstrap { visitor { channel } } }', {}).toPromise();
      console.log(JSON.stringify(data.visitorBootstrap.visitor.channel));
      urql.subscription('subscription Feed($name: String!) { channel(name: $name) { event data } }', { name: ${JSON.stringify(channel)} })
        .subscribe(({ data }) => { if (data?.channel.event === 'test.snippet') done(data.channel.data); });`;
    expect(await runSnippet('urql', channel, values, epilogue)).toEqual([
      JSON.stringify(channel),
      JSON.stringify({ snippet: 'urql' }),
    ]);
  }, 60_000);

  it('pusher-js: an agent keeps its private channel with pusherOptions and keepChannel', async () => {
    const { token } = await agentSession(t.url, 'alice');
    const values = { wsAddress: t.wsUrl, appkey: 'demo-appkey', token, agentId: 'a_alice', origin: t.url };
    const epilogue = `
      pusher.channel('private-agent-a_alice').bind('test.snippet', (data) => { pusher.disconnect(); done(data); });`;
    expect(await runSnippet('pusher', 'agent-a_alice', values, epilogue)).toEqual([
      JSON.stringify({ snippet: 'pusher' }),
    ]);
  }, 60_000);

  it("client/README.md: its usage block runs as written; its other snippets are the docs' own text", async () => {
    const { token: visitorTokenValue } = await visitorToken(t.url);
    const { body } = await new HttpClient(t.url).json<{ visitor: { channel: string } }>('/visitor/data/get', {
      headers: { authorization: `Bearer ${visitorTokenValue}` },
    });
    const channel = body.data.visitor.channel;
    const values = {
      bootstrap: { setting: { wsAddress: t.wsUrl } },
      appkey: 'demo-appkey',
      visitorToken: visitorTokenValue,
      channel,
    };
    // The block subscribes, reads the position, unsubscribes and closes: it ends by itself.
    const epilogue = `
      const fetchNewVisitorToken = async () => ''; const render = () => {};
      console.log(JSON.stringify('closed'));`;
    // Its onStatus logs each state; the epilogue's line comes after the close.
    const lines = await runSnippet('readme-parley-client', channel, values, epilogue, 'client/README.md');
    expect(lines.at(-1)).toBe(JSON.stringify('closed'));
    expect(lines.slice(0, -1)).toContain('closed');
    const names = snippetNames('client/README.md').filter((n) => n !== 'readme-parley-client');
    expect(names.sort()).toEqual(['apollo', 'pusher', 'urql']);
    for (const name of names) expect(docSnippet(name, 'client/README.md')).toBe(docSnippet(name));
  }, 60_000);
});
