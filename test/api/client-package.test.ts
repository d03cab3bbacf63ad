import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSession } from '../support/clients.js';
import { INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';

// Issue 32: the first-party client installs with one documented command from the gateway it
// talks to, and runs in plain Node as installed.

const run = promisify(execFile);
let t: TestApp;
let project: string;
beforeAll(async () => {
  t = await startTestApp();
  project = mkdtempSync(join(tmpdir(), 'parley-client-install-'));
});
afterAll(async () => {
  await t?.stop();
  if (project) rmSync(project, { recursive: true, force: true });
});

describe('@parley/client installs from the gateway', () => {
  it('`npm install <gateway>/client/parley-client.tgz` installs a package that subscribes and receives an event', async () => {
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    // Its peer dependency (graphql-ws) and ws (Node 20 has no global WebSocket) come from this
    // project's node_modules: the test reaches no registry.
    await run(
      'npm',
      ['install', '--no-audit', '--no-fund', '--legacy-peer-deps', `${t.url}/client/parley-client.tgz`],
      { cwd: project },
    );
    for (const dep of ['graphql-ws', 'ws']) {
      symlinkSync(resolve('node_modules', dep), join(project, 'node_modules', dep), 'dir');
    }
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
      ]
        .map((f) => `package/${f}`)
        .sort(),
    );
  });
});
