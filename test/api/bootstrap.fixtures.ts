import { request } from 'node:http';
import type { Database } from '../../src/db/client.js';
import { type Envelope, HttpClient } from '../support/clients.js';

/** The JSON type of a value as a legacy client sees it: `null`, `array`, or `typeof`. */
export const jsonType = (value: unknown) => (value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value);

/**
 * The shape of a JSON value: objects become their (sorted) keys mapped to shapes, arrays the
 * shape of their first element, leaves their JSON type. Snapshotting it freezes field names and types.
 */
export function shapeOf(value: unknown): unknown {
  if (Array.isArray(value)) return value.length ? [shapeOf(value[0])] : [];
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, shapeOf((value as Record<string, unknown>)[key])]),
    );
  }
  return jsonType(value);
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** `POST /visitor/token` with a JSON body; the raw envelope, success or not. */
export async function postVisitorToken(base: string, body: unknown, headers: Record<string, string> = {}) {
  return new HttpClient(base).json<{ token: string; uid: string; expires_in: number }>('/visitor/token', {
    method: 'POST',
    json: body,
    headers,
  });
}

/** `GET /visitor/data/get` as a legacy widget calls it. */
export async function visitorData(base: string, token: string, path = '/visitor/data/get') {
  return new HttpClient(base).json(path, { headers: { ...bearer(token), accept: 'application/json' } });
}

/**
 * A GET with headers fetch() will not send as given (notably `Host`), over node:http.
 */
export function rawGet(base: string, path: string, headers: Record<string, string>) {
  const url = new URL(base);
  return new Promise<{ status: number; body: Envelope }>((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, method: 'GET', headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The SQL statements `run` sends through the app's database. */
/**
 * Statements of the background jobs (the chat service's outbox drain, queue retry and idle sweep,
 * src/resolvers/chat-service.ts; the webhook dispatcher's claim of due deliveries,
 * src/resolvers/integration/webhooks/delivery.ts), which may run while a request is measured:
 * not the request's.
 */
const BACKGROUND_JOB =
  /event_outbox|pg_try_advisory_xact_lock|select distinct "merchant_id" from "conversations"|idle_close_minutes|webhook_endpoints|webhook_deliveries/;

export async function statementsOf(database: Database, run: () => Promise<unknown>) {
  const statements: string[] = [];
  const stop = database.onQuery((sql) => {
    if (!BACKGROUND_JOB.test(sql)) statements.push(sql);
  });
  try {
    await run();
  } finally {
    stop();
  }
  return statements;
}
