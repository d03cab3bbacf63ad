import { CAPTCHA } from './test-app.js';

export interface Envelope<T = any> {
  code: number;
  msg: string;
  data: T;
}

/** A pooled keep-alive socket the server closed as idle just as it was reused: nothing was answered. */
const staleSocket = (error: unknown) => {
  const code = (error as { cause?: { code?: string } }).cause?.code;
  return code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE';
};

/**
 * fetch, sent again once when the request died on a stale pooled socket, as browsers do: on a
 * loaded machine the client's idle timer can fire after the server's keep-alive timeout, so a
 * reused socket is reset before any answer (the request never reached a handler).
 */
async function fetchOnFreshSocket(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (error) {
    if (!staleSocket(error) || (init.body !== undefined && typeof init.body !== 'string' && init.body !== null))
      throw error;
    return fetch(url, init);
  }
}

/**
 * A browser-like HTTP client: keeps the cookies the server sets (one jar per client) and
 * answers with status, headers and parsed JSON.
 */
export class HttpClient {
  cookies = new Map<string, string>();
  constructor(readonly base: string) {}

  async request(path: string, init: RequestInit & { form?: Record<string, string>; json?: unknown } = {}) {
    const headers = new Headers(init.headers);
    let body = init.body;
    if (init.form) {
      headers.set('content-type', 'application/x-www-form-urlencoded');
      body = new URLSearchParams(init.form).toString();
    }
    if (init.json !== undefined) {
      headers.set('content-type', 'application/json');
      body = JSON.stringify(init.json);
    }
    if (this.cookies.size && !headers.has('cookie')) {
      headers.set('cookie', [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; '));
    }
    const res = await fetchOnFreshSocket(this.base + path, { ...init, headers, body, redirect: 'manual' });
    for (const cookie of res.headers.getSetCookie()) {
      const [pair = ''] = cookie.split(';');
      const eq = pair.indexOf('=');
      this.cookies.set(pair.slice(0, eq), pair.slice(eq + 1));
    }
    return res;
  }

  async json<T = any>(path: string, init: Parameters<HttpClient['request']>[1] = {}) {
    const res = await this.request(path, init);
    const text = await res.text();
    let body: Envelope<T>;
    try {
      body = JSON.parse(text);
    } catch {
      throw new Error(`${path} answered ${res.status} with non-JSON: ${text.slice(0, 200)}`);
    }
    return { status: res.status, headers: res.headers, body };
  }

  /** POSTs a GraphQL operation; `headers` may carry a token or bearer. */
  async graphql<T = any>(query: string, variables?: Record<string, unknown>, headers: Record<string, string> = {}) {
    const res = await this.request('/graphql', { method: 'POST', json: { query, variables }, headers });
    return { status: res.status, headers: res.headers, body: (await res.json()) as { data?: T; errors?: any[] } };
  }

  async captcha(kind: 'login' | 'join' = 'login') {
    const res = await this.request(`/agent/login/${kind}captcha?rand=${Math.random()}`);
    return { res, jpeg: Buffer.from(await res.arrayBuffer()) };
  }

  /** Fetches a login captcha and logs in; returns the login envelope. */
  async login(username: string, password = `${username}-password`, captcha = CAPTCHA) {
    await this.captcha('login');
    return this.json<{ token: string; redirect: string }>('/agent/login/check', {
      method: 'POST',
      form: { username, password, captcha },
    });
  }
}

/** Logs in as `username` and returns the Session ID (the `token`) and the client holding its cookie. */
export async function agentSession(base: string, username = 'alice') {
  const client = new HttpClient(base);
  const { body } = await client.login(username);
  if (body.code !== 0) throw new Error(`login as ${username} failed: ${JSON.stringify(body)}`);
  return { client, token: body.data.token };
}

/** Issues a visitor token for `appkey`. */
export async function visitorToken(base: string, appkey = 'demo-appkey', extra: Record<string, string> = {}) {
  const { body } = await new HttpClient(base).json<{ token: string; uid: string }>('/visitor/token', {
    method: 'POST',
    json: { appkey, ...extra },
  });
  if (body.code !== 0) throw new Error(`visitor token failed: ${JSON.stringify(body)}`);
  return body.data;
}

/** The private channel of the visitor holding `token`, as its bootstrap (`GET /visitor/data/get`) names it. */
export async function visitorChannel(base: string, token: string): Promise<string> {
  const { body } = await new HttpClient(base).json<{ visitor: { channel: string } }>('/visitor/data/get', {
    headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
  });
  if (body.code !== 0) throw new Error(`visitor bootstrap failed: ${JSON.stringify(body)}`);
  return body.data.visitor.channel;
}
