import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { agentSession, visitorToken } from '../support/clients.js';
import { eventually } from '../support/ws.js';
import { ALL_ON, attachmentsWorld, DRIVERS, setMerchant, upload } from './attachments.fixtures.js';

/**
 * Download budgets (issue 27; docs/attachments.md "Download"): a signed URL needs no identity,
 * so downloads are counted per client address (an agent's Session: per agent) before the
 * attachment is looked up or its object opened, in requests a minute and bytes an hour.
 */
const PER_MINUTE = 6;
const BYTES_PER_HOUR = 10_000;
const address = () => `10.${randomBytes(3).join('.')}`;

describe.each(DRIVERS)('attachments: download budgets (%s storage)', (driver) => {
  const w = attachmentsWorld(driver, {
    TRUST_PROXY: 'on',
    ATTACHMENT_DOWNLOADS_PER_MINUTE: String(PER_MINUTE),
    ATTACHMENT_DOWNLOAD_BYTES_PER_HOUR: String(BYTES_PER_HOUR),
  });
  let small: { url: string };
  let large: { url: string; size: number };
  /** Objects the gateway opened (its storage's `get`), counted from each test's start. */
  let opened = 0;

  beforeAll(async () => {
    await setMerchant(w.t, 'demo', { switches: { ...ALL_ON } });
    const visitor = await visitorToken(w.t.url);
    small = (await upload(w.t.url, Buffer.from('hello'), { bearer: visitor.token })).body.data;
    large = (await upload(w.t.url, Buffer.alloc(3000, 'a'), { bearer: visitor.token })).body.data;
    const storage = w.t.app.deps.storage;
    const get = storage.get.bind(storage);
    storage.get = (...args) => {
      opened++;
      return get(...args);
    };
  });
  beforeEach(() => {
    opened = 0;
  });

  const download = (path: string, headers: Record<string, string>) => fetch(w.t.url + path, { headers });
  async function expectRefused(res: Response, variable: string) {
    expect(res.status).toBe(429);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    const body = (await res.json()) as { code: number; msg: string };
    expect(body.code).toBe(1429);
    expect(body.msg).toContain(variable);
  }

  it('a signed URL fetched again and again from one address: ATTACHMENT_DOWNLOADS_PER_MINUTE, then 429 before the object is opened; another address unaffected', async () => {
    const from = { 'x-forwarded-for': address() };
    for (let i = 0; i < PER_MINUTE; i++) expect(await (await download(small.url, from)).text()).toBe('hello');
    expect(opened).toBe(PER_MINUTE);
    await expectRefused(await download(small.url, from), 'ATTACHMENT_DOWNLOADS_PER_MINUTE');
    expect(opened).toBe(PER_MINUTE);
    const elsewhere = await download(small.url, { 'x-forwarded-for': address() });
    expect(await elsewhere.text()).toBe('hello');
  });

  it('bytes are counted as announced (the file or the range): ATTACHMENT_DOWNLOAD_BYTES_PER_HOUR, then 429 before the object is opened', async () => {
    const from = { 'x-forwarded-for': address() };
    for (let i = 0; i < 3; i++) expect((await (await download(large.url, from)).arrayBuffer()).byteLength).toBe(3000);
    // 9,000 of 10,000 bytes spent: the whole file no longer fits, and nothing is opened for it.
    await expectRefused(await download(large.url, from), 'ATTACHMENT_DOWNLOAD_BYTES_PER_HOUR');
    expect(opened).toBe(3);
    // A range that fits is still served (the refusal spent nothing); then the budget is used up.
    const range = await download(large.url, { ...from, range: 'bytes=0-999' });
    expect(range.status).toBe(206);
    expect((await range.arrayBuffer()).byteLength).toBe(1000);
    await expectRefused(
      await download(large.url, { ...from, range: 'bytes=0-0' }),
      'ATTACHMENT_DOWNLOAD_BYTES_PER_HOUR',
    );
    expect(opened).toBe(4);
    const elsewhere = await download(large.url, { 'x-forwarded-for': address() });
    expect((await elsewhere.arrayBuffer()).byteLength).toBe(3000);
  });

  it("an agent's Session spends its own budget, not its address's (agents behind one NAT)", async () => {
    const office = { 'x-forwarded-for': address() };
    for (let i = 0; i < PER_MINUTE; i++) expect((await download(small.url, office)).status).toBe(200);
    await expectRefused(await download(small.url, office), 'ATTACHMENT_DOWNLOADS_PER_MINUTE');
    const alice = await agentSession(w.t.url, 'alice');
    const asAlice = { ...office, token: alice.token };
    for (let i = 0; i < PER_MINUTE; i++) expect(await (await download(small.url, asAlice)).text()).toBe('hello');
    // Her own budget holds her, from any address.
    await expectRefused(
      await download(small.url, { token: alice.token, 'x-forwarded-for': address() }),
      'ATTACHMENT_DOWNLOADS_PER_MINUTE',
    );
  });
});

describe('attachments: a download cut short (local storage)', () => {
  const MIB = 1024 * 1024;
  const w = attachmentsWorld('local', { TRUST_PROXY: 'on', ATTACHMENT_DOWNLOAD_BYTES_PER_HOUR: String(30 * MIB) });

  it('gives back the bytes it did not send: a video a browser opens, drops and opens again is not charged twice', async () => {
    await setMerchant(w.t, 'demo', { switches: { ...ALL_ON } });
    const visitor = await visitorToken(w.t.url);
    const big = (await upload(w.t.url, Buffer.alloc(16 * MIB, 'a'), { bearer: visitor.token })).body.data;
    const from = { 'x-forwarded-for': address() };
    // The whole 16 MiB is spent before the object is opened; the client goes after its first bytes.
    await new Promise<void>((resolve, reject) => {
      const req = request(w.t.url + big.url, { headers: from }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => {});
      req.on('close', resolve);
      req.setTimeout(10_000, () => reject(new Error('no answer')));
      req.end();
    });
    // Without the give-back, 16 + 16 MiB would pass the 30 MiB budget. A refusal spends nothing,
    // so asking again until the server has settled the first download charges nothing more.
    await eventually(async () => (await fetch(w.t.url + big.url, { headers: from })).status === 200, 'the give-back');
  });
});
