import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll } from 'vitest';
import { attachments, merchants } from '../../src/db/schema.js';
import { createObjectStorage, type ObjectStorage } from '../../src/stores/storage/index.js';
import type { Envelope } from '../support/clients.js';
import { type S3Server, startS3Server } from '../support/s3.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/** Both storage drivers: every attachments suite runs on each (and on the run's database mode). */
export const DRIVERS = ['local', 's3'] as const;
export type Driver = (typeof DRIVERS)[number];

export interface AttachmentsWorld {
  t: TestApp;
  /** A second handle on the gateway's storage, to look at what is (not) stored. */
  storage: ObjectStorage;
  dir: string;
}

/**
 * A real gateway per driver: its own attachments directory and, for `s3`, its own s3rver
 * process. The returned object is filled in by `beforeAll`.
 */
export function attachmentsWorld(driver: Driver, env: Record<string, string> = {}): AttachmentsWorld {
  const world = {} as AttachmentsWorld;
  let s3: S3Server | undefined;
  beforeAll(async () => {
    world.dir = mkdtempSync(join(tmpdir(), 'parley-attachments-'));
    s3 = driver === 's3' ? await startS3Server() : undefined;
    world.t = await startTestApp({ env: { ATTACHMENTS_DIR: world.dir, ...(s3 ? s3.env() : {}), ...env } });
    world.storage = await createObjectStorage(world.t.config.attachments);
  });
  afterAll(async () => {
    await world.storage?.close();
    await world.t?.stop();
    await s3?.stop();
    if (world.dir) rmSync(world.dir, { recursive: true, force: true });
  });
  return world;
}

export type MerchantPatch = Partial<typeof merchants.$inferInsert>;

/** Changes a merchant's settings (switches, limits, quota) for a test, as `merchant:set` does (cache invalidated). */
export async function setMerchant(t: TestApp, bid: string, patch: MerchantPatch) {
  const [row] = await t.app.deps.db.update(merchants).set(patch).where(eq(merchants.bid, bid)).returning();
  if (row) t.app.deps.configCache.invalidate(row.id);
}

export const ALL_ON = {
  voice: 'on',
  sound: 'on',
  upload_file: 'on',
  upload_img: 'on',
  emoji: 'on',
  session_invite_rating: 'on',
  session_invite_resolved: 'on',
} as const;

/** What the gateway holds: stored objects, attachment rows, uploads in progress. */
export async function stored(w: AttachmentsWorld) {
  const rows = await w.t.app.deps.db.select().from(attachments);
  let incoming: string[] = [];
  try {
    incoming = readdirSync(join(w.dir, 'incoming'));
  } catch {}
  return { objects: await w.storage.list(''), rows, incoming };
}

/** Removes every attachment (rows and objects), so each test starts from nothing. */
export async function clearAttachments(w: AttachmentsWorld) {
  await w.t.app.deps.db.delete(attachments);
  for (const key of await w.storage.list('')) await w.storage.delete(key);
}

export interface UploadOptions {
  /** Sent as `Authorization: Bearer`. */
  bearer?: string;
  /** Sent as the agent's Session `token` header. */
  agentToken?: string;
  path?: '/visitor/upload' | '/agent/upload';
  filename?: string;
  contentType?: string;
  /** The `kind` field, sent before the file. */
  kind?: string;
  /** `kind` as a query parameter instead. */
  queryKind?: string;
  /** More request headers (e.g. X-Forwarded-For behind TRUST_PROXY). */
  headers?: Record<string, string>;
}

/** A multipart upload with fetch (which sends a Content-Length); the parsed envelope. */
export async function upload(base: string, bytes: Buffer, o: UploadOptions) {
  const form = new FormData();
  if (o.kind) form.append('kind', o.kind);
  form.append(
    'file',
    new Blob([new Uint8Array(bytes)], { type: o.contentType ?? 'application/octet-stream' }),
    o.filename ?? 'f.bin',
  );
  const headers: Record<string, string> = { ...o.headers };
  if (o.bearer) headers.authorization = `Bearer ${o.bearer}`;
  if (o.agentToken) headers.token = o.agentToken;
  const path = (o.path ?? '/visitor/upload') + (o.queryKind ? `?kind=${o.queryKind}` : '');
  const res = await fetch(base + path, { method: 'POST', body: form, headers });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Envelope };
}

/** The parts of a multipart body around the file's bytes, for uploads written by hand. */
export function multipartFrame(o: { filename?: string; contentType?: string; kind?: string }) {
  const boundary = `----parley${Math.random().toString(16).slice(2)}`;
  let head = '';
  if (o.kind) head += `--${boundary}\r\nContent-Disposition: form-data; name="kind"\r\n\r\n${o.kind}\r\n`;
  head += `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${o.filename ?? 'f.bin'}"\r\nContent-Type: ${o.contentType ?? 'application/octet-stream'}\r\n\r\n`;
  return {
    contentType: `multipart/form-data; boundary=${boundary}`,
    head: Buffer.from(head),
    tail: Buffer.from(`\r\n--${boundary}--\r\n`),
  };
}

/**
 * An upload written by hand with node:http: `chunked` (no Content-Length) or with a given
 * `contentLength`; `write` sends the body and may stop early. Resolves with the answer, or
 * with `{status: 0}` when the connection was closed without one.
 */
export function rawUpload(
  url: string,
  headers: Record<string, string>,
  write: (req: ReturnType<typeof request>) => void,
): Promise<{ status: number; body?: Envelope; error?: string }> {
  return new Promise((resolve) => {
    const req = request(url, { method: 'POST', headers }, (res) => {
      let text = '';
      res.on('data', (d) => {
        text += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }));
      res.on('error', (e) => resolve({ status: res.statusCode ?? 0, error: String(e) }));
    });
    req.on('error', (e) => resolve({ status: 0, error: String(e) }));
    write(req);
  });
}

/** Waits (up to `ms`) until `check` holds; fails with `what` otherwise. */
export async function eventually<T>(check: () => Promise<T>, accept: (v: T) => boolean, what: string, ms = 10_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (accept(value)) return value;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(value)} after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
