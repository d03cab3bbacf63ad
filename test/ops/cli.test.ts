import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type CommandContext, runCommand } from '../../src/cli/commands.js';
import { WsCloseCode } from '../../src/subscriptions/close-codes.js';
import { agentSession, HttpClient } from '../support/clients.js';
import { emptyClusterIn } from '../support/pglite-template.js';
import { freshStores, INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';

const REAL_SERVICES = Boolean(process.env.DATABASE_URL && process.env.REDIS_URL);

/** Runs a CLI command in-process against the running test app's own stores. */
async function cli(t: TestApp, ...argv: string[]) {
  let out = '';
  let err = '';
  const store = t.app.sessions.store;
  const ctx: CommandContext = {
    deps: t.app.deps,
    sessions: { destroy: (sid) => promisify<string, void>(store.destroy.bind(store))(sid) },
    env: { INTERNAL_API_TOKEN: INTERNAL_TOKEN },
    io: { out: (s) => (out += s), err: (s) => (err += s) },
  };
  const code = await runCommand(ctx, argv);
  return { code, err, json: out ? JSON.parse(out) : undefined };
}

/** An agent's subscription to `channel`, recording what arrives and how the socket ends. */
function subscribe(t: TestApp, token: string, appkey: string, channel: string) {
  const events: { event: string; data: unknown }[] = [];
  let closeCode: number | undefined;
  let completed = false;
  const client = createClient({
    url: t.wsUrl,
    webSocketImpl: WebSocket,
    connectionParams: { appkey, token },
    retryAttempts: 0,
    // Not lazy: the client would close (1000) itself as soon as its one subscription completes.
    lazy: false,
    onNonLazyError: () => {}, // the close is recorded below
    on: {
      closed: (e) => {
        closeCode = (e as { code: number }).code;
      },
    },
  });
  const ready = new Promise<void>((resolve) => {
    client.on('connected', () => resolve());
  });
  client.subscribe(
    { query: 'subscription($name: String!) { channel(name: $name) { event data } }', variables: { name: channel } },
    {
      next: (r) => {
        const e = (r.data as { channel?: { event: string; data: unknown } } | undefined)?.channel;
        if (e) events.push(e);
      },
      error: () => {
        completed = true;
      },
      complete: () => {
        completed = true;
      },
    },
  );
  return {
    events,
    ready,
    /** The subscription has its `subscribed` event: it is registered and will get what follows. */
    subscribed: () => events.some((e) => e.event === 'subscribed'),
    closed: () => closeCode !== undefined,
    closeCode: () => closeCode,
    completed: () => completed,
    dispose: () => client.dispose(),
  };
}

/** Logs in with a password (the shared helper assumes the demo `<name>-password`). */
async function loginAs(t: TestApp, username: string, password: string) {
  const client = new HttpClient(t.url);
  const { body } = await client.login(username, password);
  if (body.code !== 0) throw new Error(`login as ${username} failed: ${JSON.stringify(body)}`);
  return { client, token: body.data.token as string };
}

async function until(check: () => boolean, what: string, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('admin CLI commands (npm run cli -- …)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.stop());

  it('merchant:create prints the appkey and identity secret, and the appkey issues visitor tokens', async () => {
    const merchant = await cli(t, 'merchant:create', '--bid', 'shop1', '--name', 'Shop One');
    expect(merchant.code).toBe(0);
    expect(merchant.json).toMatchObject({ bid: 'shop1', appname: 'Shop One' });
    expect(merchant.json.appkey).toMatch(/^shop1-/);
    expect(merchant.json.identitySecret.length).toBeGreaterThanOrEqual(32);

    const issued = await cli(t, 'visitor-token:issue', '--appkey', merchant.json.appkey, '--nickname', 'Zoe');
    expect(issued.code).toBe(0);
    const boot = await new HttpClient(t.url).json('/visitor/data/get', {
      headers: { authorization: `Bearer ${issued.json.token}` },
    });
    expect(boot.body.code).toBe(0);
    expect(boot.body.data.visitor.nickname).toBe('Zoe');
    expect(boot.body.data.setting.appname).toBe('Shop One');

    // An identified visitor (signed with the identity secret) keeps its uid.
    const a = await cli(t, 'visitor-token:issue', '--appkey', merchant.json.appkey, '--user-id', 'u-42');
    const b = await cli(t, 'visitor-token:issue', '--appkey', merchant.json.appkey, '--user-id', 'u-42');
    expect(a.json.uid).toBe(b.json.uid);

    const again = await cli(t, 'merchant:create', '--bid', 'shop1', '--name', 'Other');
    expect(again.code).toBe(1);
    expect(again.err).toMatch(/already taken/);
  });

  it('merchant:set changes a switch and an upload limit: the next visitor bootstrap answers them', async () => {
    const merchant = await cli(t, 'merchant:create', '--bid', 'shop2', '--name', 'Shop Two');
    const issued = await cli(t, 'visitor-token:issue', '--appkey', merchant.json.appkey);
    const setting = async () =>
      (
        await new HttpClient(t.url).json('/visitor/data/get', {
          headers: { authorization: `Bearer ${issued.json.token}` },
        })
      ).body.data.setting;
    expect((await setting()).emoji).toBeUndefined(); // not configured
    const set = await cli(t, 'merchant:set', '--bid', 'shop2', '--key', 'emoji', '--value', 'on');
    expect(set).toMatchObject({ code: 0, json: { bid: 'shop2', key: 'emoji', value: 'on', settingsVersion: 2 } });
    expect((await cli(t, 'merchant:set', '--bid', 'shop2', '--key', 'file_max_bytes', '--value', '5000000')).code).toBe(
      0,
    );
    const after = await setting();
    expect(after.emoji).toBe('on');
    expect(after.upload_limits.file_max_bytes).toBe(5000000);
    const bad = await cli(t, 'merchant:set', '--bid', 'shop2', '--key', 'emoji', '--value', 'yes');
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/emoji must be on, off or unset/);
  });

  it('agent:create prints a generated password the agent logs in with', async () => {
    await cli(t, 'merchant:create', '--bid', 'shop2', '--name', 'Shop Two');
    const agent = await cli(t, 'agent:create', '--bid', 'shop2', '--username', 'carol', '--nickname', 'Carol');
    expect(agent.code).toBe(0);
    expect(agent.json).toMatchObject({ username: 'carol', level: 'agent', bid: 'shop2' });
    const { client } = await loginAs(t, 'carol', agent.json.password);
    const workbench = await client.json('/agent/data/get');
    expect(workbench.body.code).toBe(0);
    expect(workbench.body.data.agent.nickname).toBe('Carol');
    expect(workbench.body.data.setting.bid).toBe('shop2');
    expect(workbench.body.data.agent_groups.map((g: { name: string }) => g.name)).toEqual(['Default']);
  });

  it('agent:disable ends every Session of the agent: next request not logged in, subscriptions end, login refused', async () => {
    await cli(t, 'merchant:create', '--bid', 'shop3', '--name', 'Shop Three', '--appkey', 'shop3-appkey');
    await cli(t, 'agent:create', '--bid', 'shop3', '--username', 'dan', '--password', 'dan-password-1');
    const first = await loginAs(t, 'dan', 'dan-password-1');
    const second = await loginAs(t, 'dan', 'dan-password-1');
    const sub = subscribe(t, first.token, 'shop3-appkey', 'global-shop3');
    await sub.ready;
    await until(sub.subscribed, 'the subscription to register');

    const disabled = await cli(t, 'agent:disable', '--username', 'dan');
    expect(disabled.code).toBe(0);
    expect(disabled.json).toMatchObject({ username: 'dan', disabled: true, sessionsEnded: 2 });

    for (const { client } of [first, second]) expect((await client.json('/agent/data/get')).body.code).toBe(-1);
    // The Session's end is announced on the subscription, which completes, and the socket
    // closes with 4401 (SessionEnded) — not any close or error.
    await until(sub.closed, 'the socket to close');
    expect(sub.events.at(-1)).toMatchObject({ event: 'session.ended', data: { reason: 'disabled' } });
    expect(sub.completed()).toBe(true);
    expect(sub.closeCode()).toBe(WsCloseCode.SessionEnded);
    await sub.dispose();
    const refused = await new HttpClient(t.url).login('dan', 'dan-password-1');
    expect(refused.body.code).toBe(1003); // ACCOUNT_DISABLED

    expect((await cli(t, 'agent:enable', '--username', 'dan')).code).toBe(0);
    expect((await new HttpClient(t.url).login('dan', 'dan-password-1')).body.code).toBe(0);
  });

  it('agent:password sets a new password and logs the agent out everywhere', async () => {
    await cli(t, 'merchant:create', '--bid', 'shop4', '--name', 'Shop Four');
    await cli(t, 'agent:create', '--bid', 'shop4', '--username', 'erin', '--password', 'erin-password-1');
    const session = await loginAs(t, 'erin', 'erin-password-1');
    const reset = await cli(t, 'agent:password', '--username', 'erin');
    expect(reset.code).toBe(0);
    expect(reset.json.sessionsEnded).toBe(1);
    expect((await session.client.json('/agent/data/get')).body.code).toBe(-1);
    expect((await new HttpClient(t.url).login('erin', 'erin-password-1')).body.code).not.toBe(0);
    expect((await new HttpClient(t.url).login('erin', reset.json.password)).body.code).toBe(0);
  });

  it('visitor-token:revoke: the token stops working at once', async () => {
    const issued = await cli(t, 'visitor-token:issue', '--appkey', 'demo-appkey');
    const bearer = { authorization: `Bearer ${issued.json.token}` };
    expect((await new HttpClient(t.url).json('/visitor/data/get', { headers: bearer })).body.code).toBe(0);
    const revoked = await cli(t, 'visitor-token:revoke', `--token=${issued.json.token}`);
    expect(revoked.json).toEqual({ revoked: true });
    expect((await new HttpClient(t.url).json('/visitor/data/get', { headers: bearer })).status).toBe(401);
    expect((await cli(t, 'visitor-token:revoke', '--token', 'no-such-token')).json).toEqual({ revoked: false });
  });

  it("attachments:purge removes one visitor's uploads (rows and objects) and prints what went", async () => {
    const issued = await cli(t, 'visitor-token:issue', '--appkey', 'demo-appkey');
    const uploadText = async (text: string) => {
      const form = new FormData();
      form.append('file', new Blob([text]), 'note.txt');
      const res = await fetch(`${t.url}/visitor/upload`, {
        method: 'POST',
        body: form,
        headers: { authorization: `Bearer ${issued.json.token}` },
      });
      return ((await res.json()) as { data: { url: string; size: number } }).data;
    };
    const first = await uploadText('first upload');
    const second = await uploadText('second');
    expect((await fetch(t.url + first.url)).status).toBe(200);
    const purged = await cli(t, 'attachments:purge', '--bid', 'demo', '--visitor', issued.json.uid);
    expect(purged.code).toBe(0);
    expect(purged.json).toEqual({ removed: 2, bytes: first.size + second.size });
    expect((await fetch(t.url + first.url)).status).toBe(404);
    expect((await cli(t, 'attachments:purge', '--bid', 'demo')).err).toMatch(/--visitor or --agent/);
  });

  it('a token that begins with "-" is a usage error after a space, and is read after "=" (docs/operations.md: Admin CLI)', async () => {
    const spaced = await cli(t, 'visitor-token:revoke', '--token', '-leading-dash');
    expect(spaced.code).toBe(2);
    expect(spaced.err).toContain("'--token=-XYZ'");
    expect((await cli(t, 'visitor-token:revoke', '--token=-leading-dash')).json).toEqual({ revoked: false });
  });

  it('event:publish reaches a subscriber, through Redis or through the gateway internal API', async () => {
    const { token } = await agentSession(t.url, 'alice');
    const sub = subscribe(t, token, 'demo-appkey', 'global-demo');
    await sub.ready;
    await until(sub.subscribed, 'the subscription to register');

    const viaApi = await cli(
      t,
      'event:publish',
      '--channel',
      'global-demo',
      '--event',
      'ops.test',
      '--data',
      '{"n":1}',
      '--url',
      t.url,
    );
    expect(viaApi.code).toBe(0);
    await until(() => sub.events.some((e) => e.event === 'ops.test'), 'the event published through the API');

    const viaBus = await cli(t, 'event:publish', '--channel', 'global-demo', '--event', 'ops.bus', '--data', '{"n":2}');
    if (t.config.redisUrl) {
      expect(viaBus.code).toBe(0);
      await until(() => sub.events.some((e) => e.event === 'ops.bus'), 'the event published through Redis');
    } else {
      // Without Redis the CLI's bus would be its own process's: it refuses and explains instead.
      expect(viaBus.code).toBe(1);
      expect(viaBus.err).toMatch(/REDIS_URL/);
    }
    await sub.dispose();
  });

  it('refuses bad input with exit code 1 and unknown commands or options with 2', async () => {
    expect((await cli(t, 'agent:create', '--bid', 'nope', '--username', 'x')).code).toBe(1);
    expect((await cli(t, 'agent:create', '--bid', 'demo', '--username', 'bad name')).err).toMatch(/username/);
    expect((await cli(t, 'agent:disable', '--username', 'nobody')).code).toBe(1);
    expect((await cli(t, 'no:such')).code).toBe(2);
    expect((await cli(t, 'agent:disable', '--nope', 'x')).code).toBe(2);
  });
});

describe('the CLI as a process, on the database of the environment', () => {
  let stores: Awaited<ReturnType<typeof freshStores>>;
  let dir: string;
  beforeAll(async () => {
    stores = await freshStores();
    dir = mkdtempSync(join(tmpdir(), 'parley-cli-'));
    // The directory starts as PGlite's kept empty cluster: the first run still migrates it, but
    // initdb (PGlite's, not the CLI's) would cost that process about 4 s of CPU.
    if (!stores.databaseUrl) await emptyClusterIn(join(dir, 'pglite'));
  });
  afterAll(async () => {
    await stores.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** `node --import tsx src/cli.ts …` with DATABASE_URL (real services) or a PGlite directory. */
  function run(...argv: string[]) {
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, NODE_ENV: 'test', PGLITE_DIR: join(dir, 'pglite') };
    if (stores.databaseUrl) env.DATABASE_URL = stores.databaseUrl;
    if (stores.redisUrl) Object.assign(env, { REDIS_URL: stores.redisUrl, REDIS_PREFIX: stores.redisPrefix });
    return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', ...argv], { env });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
  }

  it(`creates a merchant, then an agent of it in a second run (${REAL_SERVICES ? 'PostgreSQL' : 'PGlite directory'})`, async () => {
    const merchant = await run('merchant:create', '--bid', 'proc1', '--name', 'Process One');
    expect(merchant.stderr).toBe('');
    expect(merchant.code).toBe(0);
    expect(JSON.parse(merchant.stdout)).toMatchObject({ bid: 'proc1' });
    const agent = await run('agent:create', '--bid', 'proc1', '--username', 'pat', '--level', 'admin');
    expect(agent.code).toBe(0);
    expect(JSON.parse(agent.stdout)).toMatchObject({ username: 'pat', level: 'admin' });
  }, 120_000);
});
