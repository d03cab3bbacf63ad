import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSession, HttpClient } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('request logs: one JSON line per request, with a request id', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.stop());

  /** The request's log line; written when the response has been sent, so it may trail the response a little. */
  const requestLine = async (reqId: string) => {
    const find = () => t.logs.find((l) => l.msg === 'request' && l.reqId === reqId);
    for (let i = 0; i < 100 && !find(); i++) await new Promise((r) => setTimeout(r, 20));
    return find();
  };

  it('honours and returns the caller’s X-Request-Id, and logs it with the route, status and latency', async () => {
    const res = await fetch(`${t.url}/healthz`, { headers: { 'X-Request-Id': 'edge-42.abc:1' } });
    expect(res.headers.get('x-request-id')).toBe('edge-42.abc:1');
    const line = await requestLine('edge-42.abc:1');
    expect(line).toMatchObject({ level: 30, method: 'GET', url: '/healthz', route: '/healthz', status: 200 });
    expect(typeof line?.ms).toBe('number');
    expect(typeof line?.time).toBe('number');
  });

  it('gives a request without one (or with an unacceptable one) a new UUID', async () => {
    const plain = await fetch(`${t.url}/readyz`);
    expect(plain.headers.get('x-request-id')).toMatch(UUID);
    for (const forged of ['two words', 'x'.repeat(129), '{"msg":"forged"}', 'a;b']) {
      const res = await fetch(`${t.url}/healthz`, { headers: { 'X-Request-Id': forged } });
      const id = res.headers.get('x-request-id') ?? '';
      expect(id).toMatch(UUID);
      expect(await requestLine(id)).toBeDefined();
    }
  });

  it('keeps secrets out: the token query parameter is redacted, no header or body is logged', async () => {
    const { client, token } = await agentSession(t.url, 'alice');
    const res = await fetch(`${t.url}/agent/data/get?token=${token}&x=1`);
    const id = res.headers.get('x-request-id') ?? '';
    expect(await requestLine(id)).toMatchObject({
      url: '/agent/data/get?token=[redacted]&x=1',
      route: '/agent/data/get',
    });
    await client.json('/agent/data/get', { headers: { token } });
    await new HttpClient(t.url).login('alice', 'a-secret-password-attempt');
    const raw = t.rawLogs();
    expect(raw).not.toContain(token);
    expect(raw).not.toContain('a-secret-password-attempt');
    expect(raw).not.toContain('alice-password');
  });

  it('every line is a JSON object pino wrote', () => {
    for (const line of t.rawLogs().trim().split('\n')) {
      const entry = JSON.parse(line);
      expect(typeof entry.level).toBe('number');
      expect(typeof entry.msg).toBe('string');
    }
  });
});
