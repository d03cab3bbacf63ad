import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { agentSession, HttpClient } from '../support/clients.js';
import { CAPTCHA, INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';

/** The value of one sample of the exposition, e.g. `parley_events_published_total` or `x{a="b"}`; 0 when absent. */
async function sample(t: TestApp, series: string): Promise<number> {
  const text = await (await fetch(`${t.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

async function until(check: () => Promise<boolean> | boolean, what: string, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('Prometheus metrics at /metrics', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ env: { SMS_REGISTRATION: 'on' } });
  });
  afterAll(() => t.stop());

  it('is the Prometheus text format, with the process metrics', async () => {
    const res = await fetch(`${t.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    expect(text).toMatch(/^# TYPE parley_http_request_duration_seconds histogram$/m);
    expect(text).toMatch(/^process_cpu_user_seconds_total /m);
  });

  it('HTTP latency histograms are labelled by route pattern, never by the raw URL or its token', async () => {
    const { token } = await agentSession(t.url, 'alice');
    await fetch(`${t.url}/agent/data/get?token=${token}`);
    await fetch(`${t.url}/no/such/path/${token}`);
    const text = await (await fetch(`${t.url}/metrics`)).text();
    expect(text).toMatch(
      /^parley_http_request_duration_seconds_count\{method="GET",route="\/agent\/data\/get",status_code="200"\} [1-9]/m,
    );
    expect(text).toMatch(/route="unmatched",status_code="404"/);
    expect(text).not.toContain(token);
    expect(text).not.toContain('/no/such/path');
  });

  it('reports Redis and PostgreSQL health at every scrape', async () => {
    expect(await sample(t, 'parley_backend_up{backend="postgres"}')).toBe(1);
    if (t.config.redisUrl) expect(await sample(t, 'parley_backend_up{backend="redis"}')).toBe(1);
    else expect(await (await fetch(`${t.url}/metrics`)).text()).not.toContain('backend="redis"');
  });

  it('counts GraphQL operations by root field and errors by code', async () => {
    const { client, token } = await agentSession(t.url, 'alice');
    const field = 'parley_graphql_operations_total{operation_type="query",field="agentWorkbench"}';
    const before = await sample(t, field);
    const ok = await client.graphql('{ agentWorkbench { agent { agentId } } }', undefined, { token });
    expect(ok.body.errors).toBeUndefined();
    expect(await sample(t, field)).toBe(before + 1);

    const refused = await new HttpClient(t.url).graphql('{ visitorBootstrap { visitor { uid } } }');
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    expect(
      await sample(
        t,
        'parley_graphql_errors_total{operation_type="query",field="visitorBootstrap",code="UNAUTHENTICATED"}',
      ),
    ).toBeGreaterThanOrEqual(1);

    await new HttpClient(t.url).graphql('{ noSuchField }');
    expect(
      await sample(
        t,
        'parley_graphql_errors_total{operation_type="unknown",field="(invalid)",code="GRAPHQL_VALIDATION_FAILED"}',
      ),
    ).toBeGreaterThanOrEqual(1);
  });

  it('tracks open sockets and subscriptions, and events published and delivered', async () => {
    const { token } = await agentSession(t.url, 'alice');
    const published = await sample(t, 'parley_events_published_total');
    const delivered = await sample(t, 'parley_events_delivered_total');
    const received: string[] = [];
    const client = createClient({
      url: t.wsUrl,
      webSocketImpl: WebSocket,
      connectionParams: { appkey: 'demo-appkey', token },
      retryAttempts: 0,
    });
    client.subscribe(
      { query: 'subscription { channel(name: "global-demo") { event } }' },
      {
        next: (r) => {
          received.push((r.data as { channel: { event: string } }).channel.event);
        },
        error: () => {},
        complete: () => {},
      },
    );
    await until(async () => (await sample(t, 'parley_subscriptions_active')) >= 1, 'the subscription gauge');
    expect(await sample(t, 'parley_websocket_connections')).toBeGreaterThanOrEqual(1);

    const res = await fetch(`${t.url}/internal/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${INTERNAL_TOKEN}` },
      body: JSON.stringify({ channel: 'global-demo', event: 'metrics.ping', data: {} }),
    });
    expect(res.status).toBe(202);
    await until(() => received.includes('metrics.ping'), 'the event');
    expect(await sample(t, 'parley_events_published_total')).toBeGreaterThan(published);
    expect(await sample(t, 'parley_events_delivered_total')).toBeGreaterThan(delivered);

    await client.dispose();
    await until(async () => (await sample(t, 'parley_websocket_connections')) === 0, 'the socket gauge to drop');
    await until(async () => (await sample(t, 'parley_subscriptions_active')) === 0, 'the subscription gauge to drop');
  });

  it('counts login failures by reason, brute-force locks, captchas and SMS sends', async () => {
    const captchas = await sample(t, 'parley_captchas_issued_total{purpose="login"}');
    const client = new HttpClient(t.url);
    expect((await client.login('bob', 'wrong-password')).body.code).not.toBe(0);
    expect(await sample(t, 'parley_captchas_issued_total{purpose="login"}')).toBe(captchas + 1);
    expect(await sample(t, 'parley_login_failures_total{reason="credentials"}')).toBeGreaterThanOrEqual(1);

    await client.captcha('login');
    await client.json('/agent/login/check', {
      method: 'POST',
      form: { username: 'bob', password: 'bob-password', captcha: 'wrong' },
    });
    expect(await sample(t, 'parley_login_failures_total{reason="captcha"}')).toBeGreaterThanOrEqual(1);

    expect((await client.login('dave')).body.code).toBe(1003);
    expect(await sample(t, 'parley_login_failures_total{reason="disabled"}')).toBeGreaterThanOrEqual(1);

    // Five wrong passwords lock the account (docs/auth.md: brute-force limits).
    for (let i = 0; i < 5; i++) await client.login('bob', `wrong-${i}`);
    expect(await sample(t, 'parley_login_lockouts_total{scope="account"}')).toBeGreaterThanOrEqual(1);
    expect((await client.login('bob')).body.code).not.toBe(0);
    expect(await sample(t, 'parley_login_failures_total{reason="locked"}')).toBeGreaterThanOrEqual(1);

    await client.captcha('join');
    const sms = await client.json('/agent/login/smscaptcha', {
      method: 'POST',
      form: { mobile: '13800138000', captcha: CAPTCHA },
    });
    expect(sms.body.code).toBe(0);
    expect(await sample(t, 'parley_captchas_issued_total{purpose="join"}')).toBeGreaterThanOrEqual(1);
    expect(await sample(t, 'parley_sms_sends_total{outcome="sent"}')).toBe(1);
  });
});

describe('METRICS_ENABLED=off', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ env: { METRICS_ENABLED: 'off' } });
  });
  afterAll(() => t.stop());

  it('serves no /metrics', async () => {
    expect((await fetch(`${t.url}/metrics`)).status).toBe(404);
  });
});
